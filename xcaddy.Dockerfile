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
