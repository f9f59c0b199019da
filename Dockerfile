# A distroless, single-binary operator image.
#
#   docker build --build-arg HANDLERS=examples/01-minimal/example.ts -t my-operator .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro my-operator
#
# `kopf build` compiles the framework and the handler file into one binary (`deno compile
# --include`; the file is loaded by the same dynamic import as `deno run -A cli.ts run FILE`); the
# binary is `kopf run` with that file and the V8 flags it runs best with (a smaller young
# generation, V8's mid tier as its top tier: core/api/generate/build.ts, RUNTIME_V8_FLAGS). In a cluster the Pod's service account is used
# (in-cluster configuration): give it RBAC to list/watch/patch the served resources (and their
# /status when they have one) and to create core/v1 events (`kopf generate rbac` writes it).
# Container arguments are `kopf run` options, e.g. `-n my-namespace --liveness …`.
ARG DENO_VERSION=2.9.6

FROM denoland/deno:${DENO_VERSION} AS build
WORKDIR /src
COPY . .
ARG HANDLERS=examples/01-minimal/example.ts
RUN deno install --frozen \
 && deno run -A cli.ts build "${HANDLERS}" --output /out/kopf

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/kopf /usr/local/bin/kopf
USER nonroot
ENTRYPOINT ["/usr/local/bin/kopf"]
CMD ["--all-namespaces"]
