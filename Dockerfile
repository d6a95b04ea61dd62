# syntax=docker/dockerfile:1
#
# One image with Pollux's four binaries: ingest, poller, webhook and pollux.
# The command names the binary. `make image` builds it as
# ghcr.io/pollux-dev/pollux:<version>, the version (git describe) and the
# revision stamped into the binaries (--version, pollux_build_info):
#
#   make image VERSION=v0.1.0        # docker build --build-arg VERSION=... --build-arg REVISION=... -t ...
#   docker run --rm ghcr.io/pollux-dev/pollux:v0.1.0 ingest --version
#   docker run --rm ghcr.io/pollux-dev/pollux:v0.1.0 pollux sim-provider --addr 0.0.0.0:8090
#
# deploy/compose/compose.yaml, deploy/k8s/ and deploy/helm/ run it.

# ---- build: static binaries (no cgo), without paths of the build machine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The context has no .git (.dockerignore): the version comes as arguments.
ARG VERSION=dev
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w \
        -X github.com/pollux-dev/pollux/internal/platform/version.version=${VERSION} \
        -X github.com/pollux-dev/pollux/internal/platform/version.revision=${REVISION}" -o /out/ \
        ./cmd/ingest ./cmd/poller ./cmd/webhook ./cmd/pollux

# ---- runtime: Debian slim rather than distroless, for one reason: curl, so
# that `docker compose` health checks can GET /healthz (Kubernetes probes
# need nothing in the image). ca-certificates verifies the providers' TLS.
FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 pollux \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin pollux
COPY --from=build /out/ingest /out/poller /out/webhook /out/pollux /usr/local/bin/
# Never root: the binaries need no privilege (their ports are above 1024).
USER 65532:65532
# webhook receiver; metrics, /healthz and /readyz of ingest, poller, webhook.
EXPOSE 8080 9101 9102 9103
CMD ["pollux", "--help"]
# Last, so that a new version rebuilds no layer above.
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="Pollux" \
      org.opencontainers.image.source="https://github.com/pollux-dev/pollux" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
