package caddymodule

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A translated answer's usage is charged to the caller's key as a native
// one's is, whichever API each side spoke: the gateway reads it in the
// client's grammar, after translation, JSON or stream.
func TestATranslatedAnswersUsageIsChargedToTheKey(t *testing.T) {
	const key = "charge-key-0123456789abcdef"
	sawUsageAsked := make(chan bool, 4)
	chat := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream        bool `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		if !body.Stream {
			okChatUsage(w)
			return
		}
		sawUsageAsked <- body.StreamOptions.IncludeUsage
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	messages := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":3}}`)
	})
	startGateway(t, `
		key team `+key+` {
			models chatty claude
			tokens 100k/d
		}
		engine chatonly {
			to `+chat.URL+`
			models chatty
			api chat
		}
		engine claude {
			to `+messages.URL+`
			models claude
			api anthropic
		}`)
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/team/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	before := scrape(t)
	for _, c := range []struct{ name, path, body string }{
		{"Messages JSON on a chat engine", "/v1/messages", `{"model":"chatty","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{"a Messages stream on a chat engine", "/v1/messages", `{"model":"chatty","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"a Responses stream on a chat engine", "/v1/responses", `{"model":"chatty","max_output_tokens":50,"stream":true,"input":"hi"}`},
		{"Chat JSON on a Messages engine", "/v1/chat/completions", `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp, body := post(t, c.path, c.body, "Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
		if resp.StatusCode != 200 || strings.Contains(body, `"error":{`) {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	for range 2 {
		if !<-sawUsageAsked {
			t.Fatal("a translated stream to a chat engine did not ask for its usage")
		}
	}
	after := scrape(t)
	charged := func(kind string) float64 {
		labels := `key="team",kind="` + kind + `"`
		return sample(t, after, "llm_gateway_key_tokens_total", labels) - sample(t, before, "llm_gateway_key_tokens_total", labels)
	}
	// three chat answers of 11 + 7, and a Messages one of 5 uncached + 2
	// cached input (7 prompt tokens in OpenAI's count) and 3 output
	if p, c := charged("prompt"), charged("completion"); p != 3*11+7 || c != 3*7+3 {
		t.Fatalf("charged prompt %v, completion %v; want %d, %d\n%s", p, c, 3*11+7, 3*7+3, grepLines(after, "key_tokens"))
	}
}

// okChatUsage answers a minimal chat completion with its usage.
func okChatUsage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
}
