package upstream

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The credentials a request carries to an engine, whole and in the parts an
// echo may show alone, are masked out of its error answer; the answer's
// JSON keeps its shape.
func TestAnErrorAnswerEchoesNoCredential(t *testing.T) {
	sigv4 := "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLEKEY000001/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name   string
		cfg    engines.Config
		header http.Header
		echoed []string // what an echo may show, each of which must go
	}{
		{"a bearer key", engines.Config{APIKey: "sk-engine-key-0001"},
			http.Header{"Authorization": {"Bearer sk-engine-key-0001"}},
			[]string{"Bearer sk-engine-key-0001", "sk-engine-key-0001"}},
		{"a key in the provider's header", engines.Config{APIKey: "AIzaEngineKey0002", APIKeyHeader: "x-goog-api-key"},
			http.Header{"X-Goog-Api-Key": {"AIzaEngineKey0002"}},
			[]string{"AIzaEngineKey0002"}},
		{"a Vertex token", engines.Config{},
			http.Header{"Authorization": {"Bearer ya29.vertex-access-token"}},
			[]string{"ya29.vertex-access-token"}},
		{"SigV4 and its session token", engines.Config{},
			http.Header{"Authorization": {sigv4}, "X-Amz-Security-Token": {"session/token+0003=="}},
			[]string{sigv4, "0123456789abcdef0123456789abcdef", "AKIAEXAMPLEKEY000001", "session/token+0003=="}},
	} {
		secrets := SentSecrets(c.header, &c.cfg)
		for _, e := range c.echoed {
			body := `{"error":{"message":"denied","max_tokens": 5000,"got":"` + e + `"}}`
			h := http.Header{"X-Echo": {"got " + e}}
			out := string(MaskEcho([]byte(body), h, secrets))
			if strings.Contains(out, e) || strings.Contains(h.Get("X-Echo"), e) {
				t.Errorf("%s: %q stays: %s / %s", c.name, e, out, h.Get("X-Echo"))
			}
			if !strings.HasPrefix(out, `{"error":{"message":"denied","max_tokens": 5000,"got":"`) || !strings.HasSuffix(out, `"}}`) {
				t.Errorf("%s: the answer lost its shape: %s", c.name, out)
			}
		}
	}
	if got := SentSecrets(http.Header{"Content-Type": {"application/json"}}, &engines.Config{}); len(got) != 0 {
		t.Errorf("a request without credentials: %q", got)
	}
}
