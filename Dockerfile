# A distroless, single-binary operator image.
#
#   docker build --build-arg HANDLERS=examples/01-minimal/example.ts -t my-operator .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro my-operator
#
# `kopf build` compiles the framework and the handler file into one binary (`deno compile
# --include`; the file is loaded by the same dynamic import as `deno run -A cli.ts run FILE`); the
# binary is `kopf run` with that file and the V8 flags it runs best with (a smaller young
# generation, V8's mid tier as its top tier: core/cli/generate/runtime_flags.ts, RUNTIME_V8_FLAGS). In a cluster the Pod's service account is used
# (in-cluster configuration): give it RBAC to list/watch/patch the served resources (and their
# /status when they have one) and to create core/v1 events (`kopf generate rbac` writes it).
# Container arguments are `kopf run` options, e.g. `-n my-namespace --liveness …`.
#
# Base images: exact tags, plus a digest per image that you set once you have resolved it
# yourself (`docker buildx imagetools inspect denoland/deno:2.9.6`, `crane digest …`). A tag can
# be moved to other content by whoever controls it; a digest cannot. The repository carries no
# digest because none could be resolved and checked where this file was written (no registry
# access) — an unverified digest would be worse than none. Give them with the `@`:
#
#   docker build --build-arg DENO_DIGEST=@sha256:<64 hex> --build-arg RUNTIME_DIGEST=@sha256:<64 hex> …
#
# With both set, the build uses exactly those images (the tag is then only informative).
# The build stage installs the npm packages of deno.lock only (`--frozen`: a changed or missing
# lock entry fails the build instead of resolving anew). .dockerignore keeps tests, docs, .git out.
ARG DENO_VERSION=2.9.6
# REQUIRED for a pinned build: `@sha256:…` of denoland/deno:${DENO_VERSION}; empty = the tag only.
ARG DENO_DIGEST=""
# REQUIRED for a pinned build: `@sha256:…` of gcr.io/distroless/cc-debian12:nonroot (a rolling
# tag, rebuilt with Debian's security updates: re-resolve it when you update); empty = the tag.
ARG RUNTIME_DIGEST=""

FROM denoland/deno:${DENO_VERSION}${DENO_DIGEST} AS build
WORKDIR /src
COPY . .
ARG HANDLERS=examples/01-minimal/example.ts
RUN deno install --frozen \
 && deno run -A cli.ts build "${HANDLERS}" --output /out/kopf

FROM gcr.io/distroless/cc-debian12:nonroot${RUNTIME_DIGEST}
COPY --from=build /out/kopf /usr/local/bin/kopf
# By number (the distroless `nonroot` user), so that `runAsNonRoot` can be checked by the kubelet.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kopf"]
CMD ["--all-namespaces"]
