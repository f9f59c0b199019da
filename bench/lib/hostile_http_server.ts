/**
 * The fixture of bench/hostile_http.ts: a `WebhookServer` (TLS, self-signed) of the source tree
 * at the given root, answering every review with "allowed", until stdin closes. Prints its port
 * and the CA (PEM, base64) as one JSON line.
 *
 *   deno run -A bench/lib/hostile_http_server.ts <root of a source tree>
 * @module
 */

const root = new URL(`file://${Deno.args[0] ?? new URL("../..", import.meta.url).pathname}/`);
const { WebhookServer } = await import(
  new URL("mod.ts", root).href
) as typeof import("../../mod.ts");
const controller = new AbortController();
const server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
const serving = server.serve(
  (review) =>
    Promise.resolve({
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: String(review.request?.uid ?? ""), allowed: true },
    }),
  { signal: controller.signal },
);
const config = (await serving.next()).value as { caBundle: string };
console.log(JSON.stringify({ port: server.port, caBundle: config.caBundle }));
const rest = serving.next();
for await (const _ of Deno.stdin.readable) { /* until closed */ }
controller.abort();
await rest;
