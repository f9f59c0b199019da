# A distroless, single-binary operator image.
#
#   docker build --build-arg HANDLERS=examples/01-minimal/example.ts -t my-operator .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro my-operator
#
# The handler files are compiled into the binary (`deno compile --include`) and loaded by the
# same dynamic import as with `deno run -A cli.ts run FILE`. In a cluster, the Pod's service
# account is used (in-cluster configuration); give it RBAC for the watched resources, their
# /status if they have one, and core/v1 events (create).
ARG DENO_VERSION=2.9.6

FROM denoland/deno:${DENO_VERSION} AS build
WORKDIR /src
COPY deno.json deno.lock* ./
COPY . .
ARG HANDLERS=examples/01-minimal/example.ts
RUN deno install --frozen=false \
 && deno compile -A --include "${HANDLERS}" --output /out/kopf cli.ts \
 && echo "/src/${HANDLERS}" > /out/handlers

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/kopf /usr/local/bin/kopf
ARG HANDLERS=examples/01-minimal/example.ts
ENV KOPF_HANDLERS=/src/${HANDLERS}
USER nonroot
ENTRYPOINT ["/usr/local/bin/kopf", "run", "--all-namespaces"]
CMD ["/src/examples/01-minimal/example.ts"]
