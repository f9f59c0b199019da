# A distroless, single-binary operator image.
#
#   docker build --build-arg HANDLERS=examples/01-minimal/example.ts -t my-operator .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro my-operator
#
# The handler file is compiled into the binary (`deno compile --include`) and loaded by the same
# dynamic import as `deno run -A cli.ts run FILE`. In a cluster the Pod's service account is used
# (in-cluster configuration): give it RBAC to list/watch/patch the served resources (and their
# /status when they have one) and to create core/v1 events. Extra `kopf run` options can be
# given as container arguments after the handler path, e.g. `-n my-namespace --liveness …`.
ARG DENO_VERSION=2.9.6

FROM denoland/deno:${DENO_VERSION} AS build
WORKDIR /src
COPY . .
ARG HANDLERS=examples/01-minimal/example.ts
# A fixed entry file that imports the chosen handlers, so the entrypoint needs no build argument.
RUN echo "import \"./${HANDLERS}\";" > /src/handlers.ts \
 && deno install --frozen \
 && deno compile -A --include /src/handlers.ts --output /out/kopf cli.ts

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/kopf /usr/local/bin/kopf
USER nonroot
ENTRYPOINT ["/usr/local/bin/kopf", "run", "/src/handlers.ts"]
CMD ["--all-namespaces"]
