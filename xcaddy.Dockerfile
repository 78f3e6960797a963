# Caddy with llm_gateway, built with xcaddy on the official Caddy builder
# image. From the repository root:
#
#   docker build -f xcaddy.Dockerfile -t caddy-llm-gateway .
#   docker run --rm -p 8080:8080 -e GATEWAY_KEYS=change-me caddy-llm-gateway
#
# The module is built from this checkout (a local path); to pin a released
# version instead, replace the --with argument by
# github.com/llmgateway/caddy-llm-gateway@vX.Y.Z and drop the COPY.
ARG CADDY_VERSION=2.11

FROM caddy:${CADDY_VERSION}-builder AS builder
# xcaddy runs `go get` on the module even though --with points it at a local
# directory; the public Go proxy answers "not found" for an unpublished
# module and Go then uses the directory. A proxy that answers 403 instead
# breaks that: .ci/xcaddy-check.sh shows the workaround (a file proxy in
# front that lists no versions of this module).
ARG GOPROXY=https://proxy.golang.org,direct
ENV GOPROXY=${GOPROXY}
COPY . /src/caddy-llm-gateway
RUN xcaddy build \
	--output /usr/bin/caddy \
	--with github.com/llmgateway/caddy-llm-gateway=/src/caddy-llm-gateway

FROM caddy:${CADDY_VERSION}
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
COPY examples/quickstart/Caddyfile /etc/caddy/Caddyfile
# the quickstart's admin endpoint listens on localhost inside the container
EXPOSE 8080
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
