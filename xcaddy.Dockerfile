# Caddy with llm_gateway, built with xcaddy (./build.sh) on the official
# Caddy builder image. From the repository root:
#
#   docker build -f xcaddy.Dockerfile -t caddy-llm-gateway .
#   docker run --rm -p 127.0.0.1:8080:8080 caddy-llm-gateway
#
# The quickstart has no keys: -p 127.0.0.1:8080:8080 publishes it on this
# host's loopback only. A bare -p 8080:8080 opens it on every interface of
# the host; do that only with a Caddyfile that sets keys.
#
# The module is built from this checkout (a local path); to pin a released
# version instead, build with
# `xcaddy build --with github.com/llmgateway/caddy-llm-gateway@vX.Y.Z`.

# The Caddy version is go.mod's (github.com/caddyserver/caddy/v2), without
# the "v": the base images and the Caddy that ./build.sh compiles agree. A
# test (TestDockerfilePinsGoModsCaddyVersion) fails when the two drift.
ARG CADDY_VERSION=2.11.9

FROM caddy:${CADDY_VERSION}-builder AS builder
# The builder image's Go may be older than go.mod's `go` line: let the go
# command fetch the toolchain go.mod asks for.
ENV GOTOOLCHAIN=auto
# ./build.sh puts a file proxy in front of this one (see there).
ARG GOPROXY=https://proxy.golang.org,direct
ENV GOPROXY=${GOPROXY}
COPY . /src/caddy-llm-gateway
WORKDIR /src/caddy-llm-gateway
RUN ./build.sh --output /usr/bin/caddy

FROM caddy:${CADDY_VERSION}
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
COPY examples/quickstart/Caddyfile /etc/caddy/Caddyfile
# The quickstart listens on localhost; in a container that is nobody's
# reach, so the image listens on every interface of the container. It has
# no keys: publish the port only where that is what you want.
ENV LLMGW_BIND=0.0.0.0
EXPOSE 8080
# Caddy is up and the gateway's admin routes answer (the quickstart's admin
# endpoint is localhost:2019, inside the container); busybox wget is in the
# image
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
	CMD wget -q -O /dev/null http://localhost:2019/llm_gateway/engines || exit 1
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
