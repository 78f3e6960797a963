package upstream

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// An engine's answer may echo the request it was sent: a proxy's error page
// that prints the headers, a debug build's 401 that quotes the key it got.
// The credentials the gateway sent (the engine's api_key in whichever
// header, a bearer token, a SigV4 Authorization and its session token)
// must not reach the client through it (issue 51): MaskEcho masks them in
// an error answer, with the masks engine output uses (engines.MaskKnown).

// credentialHeaders carry an engine's credentials, as the gateway sends
// them: its key (Authorization: Bearer, or the provider's header), a Vertex
// access token, a SigV4 signature and session token.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"}

// SentSecrets are the credentials h (a request as sent to the engine of
// cfg) carries: each header's value whole, and the parts an echo may show
// alone (a bearer's token, a SigV4 signature and access key id), longest
// first.
func SentSecrets(h http.Header, cfg *engines.Config) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); len(s) >= 4 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add(cfg.APIKey)
	names := credentialHeaders
	if cfg.APIKeyHeader != "" {
		names = append(slices.Clip(names), http.CanonicalHeaderKey(cfg.APIKeyHeader))
	}
	for _, k := range names {
		for _, v := range h[k] {
			add(v)
			if _, tok, ok := strings.Cut(v, " "); ok && !strings.Contains(strings.TrimSpace(tok), " ") {
				add(tok) // Bearer <token>
			}
			for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
				switch name, val, _ := strings.Cut(f, "="); name {
				case "Signature":
					add(val)
				case "Credential":
					id, _, _ := strings.Cut(val, "/")
					add(id)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// MaskEcho masks what of secrets an engine's error answer echoes: in its
// body, and in its headers, which are passed on with it.
func MaskEcho(body []byte, h http.Header, secrets []string) []byte {
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = engines.MaskKnown(v, secrets)
		}
	}
	if len(body) == 0 {
		return body
	}
	return []byte(engines.MaskKnown(string(body), secrets))
}
