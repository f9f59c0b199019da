/**
 * One webhook request: routes `POST <root>/<handler id>` to the framework's review function and
 * turns the outcome into an HTTP response. Transport (listening, TLS, timeouts, body limits) is
 * the server's business (`webhooks.ts`); this module sees one already-received request.
 * @module
 */

import type { AdmissionReview, WebhookFn } from "../structs/admission.ts";

/**
 * Answers one webhook request.
 *
 * @param request The received request.
 * @param root The server's root path (no trailing slash).
 * @param fn The framework's review function.
 * @returns The HTTP response.
 */
export async function handleWebhookRequest(
  request: Request,
  root: string,
  fn: WebhookFn,
): Promise<Response> {
  const path = new URL(request.url).pathname;
  if (request.method !== "POST") return new Response("Method not allowed\n", { status: 405 });
  if (path !== root && !path.startsWith(`${root}/`)) {
    return new Response("Not found\n", { status: 404 });
  }
  const rest = path.slice(root.length).replace(/^\/+/, "");
  const webhook = rest ? decodeURIComponent(rest) : undefined;
  let review: AdmissionReview;
  try {
    review = await request.json() as AdmissionReview;
  } catch {
    return new Response("The body is not JSON\n", { status: 400 });
  }
  const headers = Object.fromEntries(request.headers);
  try {
    return Response.json(await fn(review, { webhook, headers, sslpeer: null }));
  } catch (error) {
    return new Response(`${error instanceof Error ? error.message : error}\n`, { status: 400 });
  }
}
