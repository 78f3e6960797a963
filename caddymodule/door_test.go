package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// The door, round 2, through Caddy: a key holder's attacks
// against an engine that reads requests as the laxest real engines do
// (the first JSON value whatever the Content-Type, pydantic-lax numbers
// and booleans, a BOM and UTF-16 decoded). The engine may run only what the
// gateway read, and only models the key may use.
func TestTheDoorReadsEveryBodyAsTheLaxestEngineDoes(t *testing.T) {
	lax := &laxengine.Engine{}
	up := httptest.NewServer(lax)
	t.Cleanup(up.Close)
	const key = "door-key-0123456789abcd"
	startGateway(t, `
		passthrough on {
			budgets on
		}
		key door `+key+` {
			models x whisper-1
			tokens 20000/d
		}
		engine x {
			to http://127.0.0.1:9
			models x
			fallback secret
		}
		engine shared {
			to `+up.URL+`
			models shared-secret whisper-1
		}
		engine secret {
			to `+up.URL+`
			models secret
		}`)
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/door/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	secret := `{"model":"secret","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	form := func(model string) string {
		return secret + "\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + model + "\r\n--b--\r\n"
	}
	formType := "multipart/form-data; boundary=b"
	for _, c := range []struct {
		name, path, body, contentType string
		want                          int
	}{
		{"JSON then a form on a JSON route", "/v1/chat/completions", form("x"), formType, 415},
		{"JSON then a form on a form route", "/v1/audio/transcriptions", form("whisper-1"), formType, 400},
		{"a BOM on /upstream/", "/upstream/whisper-1/v1/chat/completions", "\xEF\xBB\xBF" + secret, "application/json", 400},
		{"UTF-16 on /upstream/", "/upstream/whisper-1/v1/chat/completions", laxengine.UTF16LE(secret), "application/json", 400},
		{"a body fallback naming another model of an allowed engine", "/v1/chat/completions", `{"model":"x","messages":[],"fallbacks":["shared/shared-secret"]}`, "application/json", 403},
		{"a body fallback naming an engine", "/v1/chat/completions", `{"model":"x","messages":[],"fallbacks":["secret"]}`, "application/json", 403},
		{"the engine's own fallback", "/v1/chat/completions", `{"model":"x","messages":[]}`, "application/json", 502},
		{"a stream flag as a string", "/v1/chat/completions", `{"model":"x","stream":"true","messages":[]}`, "application/json", 400},
	} {
		resp, body := post(t, c.path, c.body, "Authorization", "Bearer "+key, "Content-Type", c.contentType)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
	if ran := lax.Ran(); len(ran) != 0 {
		t.Fatalf("the engine ran %v", ran)
	}

	// 50 concurrent streams asking for ten choices each: within the budget
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			post(t, "/v1/chat/completions", `{"model":"x","stream":true,"n":"10","max_tokens":"1000","messages":[],"fallbacks":["shared/whisper-1"]}`,
				"Authorization", "Bearer "+key)
		})
	}
	wg.Wait()
	if used := lax.Tokens(); used > 24000 || used == 0 {
		t.Fatalf("50 streams of n 10 generated %d tokens on a 20000/d key", used)
	} else {
		t.Logf("50 streams of n 10 generated %d tokens on a 20000/d key", used)
	}
	for _, r := range lax.Ran() {
		if r.Model != "whisper-1" {
			t.Fatalf("the engine ran %q", r.Model)
		}
	}
}
