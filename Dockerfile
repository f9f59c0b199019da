# A distroless, single-binary operator image.
#
#   docker build --build-arg HANDLERS=examples/01-minimal/example.ts -t my-operator .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro my-operator
#
# `kopf build` compiles the framework and the handler file into one binary (`deno compile
# --include`; the file is loaded by the same dynamic import as `deno run -A cli.ts run FILE`); the
# binary is `kopf run` with that file and the V8 flags it runs best with (a smaller young
# generation, no optimising compiler: core/cli/generate/runtime_flags.ts, RUNTIME_V8_FLAGS). In a cluster the Pod's service account is used
# (in-cluster configuration): give it RBAC to list/watch/patch the served resources (and their
# /status when they have one) and to create core/v1 events (`kopf generate rbac` writes it).
# Container arguments are `kopf run` options, e.g. `-n my-namespace --liveness …`.
#
# Base images are pinned by digest: a tag can be moved to other content by whoever controls it; a
# digest cannot, and it names content in that repository only (a wrong one fails the pull, it
# cannot pull anything else). The digests below were not resolved where this file was written (no
# registry access there); each is the one that independent public Dockerfiles pin for that tag
# (the runtime's in four, the build image's in two). Re-resolve both when you update
# (`crane digest node:22-bookworm-slim`, `docker buildx imagetools inspect …`) and give them as
# build arguments, or edit the defaults:
#
#   docker build --build-arg BUILD_IMAGE=node:22-bookworm-slim@sha256:<64 hex> \
#     --build-arg RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:<64 hex> …
#
# The build stage gets Deno as every other path of this repository does: tools/deno.sh installs
# the pinned version from the npm registry after checking the package's sha512 against the
# integrity pinned in that script (so the Deno that compiles the operator is verified, not taken
# from a mutable image tag). It then installs the npm packages of deno.lock only (`--frozen`: a
# changed or missing lock entry fails the build instead of resolving anew). .dockerignore keeps
# tests, docs, .git out.
# node:22-bookworm-slim (Node.js and npm, for tools/deno.sh; glibc like the runtime image).
ARG BUILD_IMAGE=node:22-bookworm-slim@sha256:43ac6c60b8f89723f746e8a92ce91abd5017e627ce1ddfe4238355d3a30b772c
# gcr.io/distroless/cc-debian12:nonroot (glibc, libgcc, CA certificates, tzdata; no shell).
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY . .
ENV KOPF_TS_CACHE=/cache
ARG HANDLERS=examples/01-minimal/example.ts
RUN bash tools/deno.sh install --frozen \
 && bash tools/deno.sh run -A cli.ts build "${HANDLERS}" --output /out/kopf

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/kopf /usr/local/bin/kopf
# By number (the distroless `nonroot` user), so that `runAsNonRoot` can be checked by the kubelet.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kopf"]
CMD ["--all-namespaces"]
