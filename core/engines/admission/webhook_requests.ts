/**
 * One webhook request: routes `POST <root>/<handler id>` to the framework's review function and
 * turns the outcome into an HTTP response. Transport (listening, TLS, timeouts, body limits) is
 * the server's business (`webhooks.ts`); this module sees one already-received request.
 *
 * Answers: 405 for other methods, 404 outside the root path, 400 for a path that is not validly
 * percent-encoded, 415 for a body that is not declared `application/json` (the API server always
 * declares it), 400 for a body that is not JSON or not an AdmissionReview (no request, no
 * object). Everything else is answered with an AdmissionReview — when the review function
 * fails anyway, a denial (fail closed: a failed call admits the object under
 * `failurePolicy: Ignore`). Error texts are the framework's own, never a stack trace.
 * @module
 */

import type { AdmissionReview, WebhookFn } from "../../structs/admission.ts";
import { isMapping } from "../../structs/dicts.ts";

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
  if (request.method !== "POST") return text("Method not allowed", 405);
  if (path !== root && !path.startsWith(`${root}/`)) return text("Not found", 404);
  const rest = path.slice(root.length).replace(/^\/+/, "");
  let webhook: string | undefined;
  try {
    webhook = rest ? decodeURIComponent(rest) : undefined;
  } catch {
    return text("The webhook path is not validly percent-encoded", 400);
  }
  const type = mediaType(request.headers.get("content-type"));
  if (type !== "application/json") {
    return text(
      `Unsupported Content-Type ${type ? JSON.stringify(type) : "(none)"}: ` +
        "admission reviews must be sent as application/json",
      415,
    );
  }
  let review: AdmissionReview;
  try {
    review = await request.json() as AdmissionReview;
  } catch {
    return text("The body is not JSON", 400);
  }
  if (!isMapping(review)) return text("The body is not an AdmissionReview", 400);
  const headers = Object.fromEntries(request.headers);
  let answer: AdmissionReview;
  try {
    answer = await fn(review, { webhook, headers, sslpeer: null });
  } catch (error) {
    // The framework's function throws only a TypeError, for what is not a review at all.
    if (error instanceof TypeError) return text(error.message, 400);
    return denial(review, "The operator could not process the admission request.");
  }
  try {
    return Response.json(answer);
  } catch {
    return denial(review, "The operator could not serialise its admission response.");
  }
}

/** The media type of a Content-Type header: lower-case, without parameters. */
function mediaType(header: string | null): string {
  return (header ?? "").split(";")[0]!.trim().toLowerCase();
}

function text(message: string, status: number): Response {
  return new Response(`${message}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/** A denying review for a request that has a uid; else a plain 500. */
function denial(review: AdmissionReview, message: string): Response {
  const uid = isMapping(review.request) ? review.request.uid : undefined;
  if (typeof uid !== "string") return text(message, 500);
  return Response.json({
    apiVersion: typeof review.apiVersion === "string" ? review.apiVersion : "admission.k8s.io/v1",
    kind: "AdmissionReview",
    response: { uid, allowed: false, status: { message, code: 500 } },
  });
}
