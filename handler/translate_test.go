package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// The hook at the attempt's edges: a Messages request for a chat-only
// engine goes to the engine's own path, without the client's query and
// anthropic-* headers, asks a stream for its usage, and comes back in the
// client's shape; what the engine cannot carry is dropped by kind, and what
// must not be dropped is a 400 naming it and the engine.
func TestATranslatedRequestGoesToTheEnginesPathInItsAPI(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies []map[string]any
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`)
	}))
	t.Cleanup(up.Close)
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "chat", To: up.URL, Models: []string{"m"}, APIs: []string{"chat"}}}}.WithDefaults(), nil)
	var dropped []string
	g.Hooks.Untranslated = func(engine, member string) { dropped = append(dropped, engine+" "+member) }

	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages?beta=true", strings.NewReader(
		`{"model":"m","max_tokens":20,"context_management":{"edits":[]},"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", "context-management-2025-06-27")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(answer), `"type":"message"`) || !strings.Contains(string(answer), `"text":"ok"`) {
		t.Fatalf("%d %s", resp.StatusCode, answer)
	}
	res := lastResult.Load()
	if res.API != "messages" || res.EngineAPI != "chat" || !res.HasUsage || res.Usage.Input != 4 {
		t.Fatalf("result: api %s, engine api %s, usage %v %+v", res.API, res.EngineAPI, res.HasUsage, res.Usage)
	}
	mu.Lock()
	r := got[0]
	mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" || r.URL.RawQuery != "" || r.Header.Get("Anthropic-Version") != "" || r.Header.Get("Anthropic-Beta") != "" {
		t.Fatalf("sent to %s?%s with %v", r.URL.Path, r.URL.RawQuery, r.Header)
	}
	if _, ok := bodies[0]["context_management"]; ok || len(dropped) != 1 || dropped[0] != "chat context_management" {
		t.Fatalf("context_management: sent %v, dropped %v", bodies[0], dropped)
	}

	// a Chat request asking for two choices cannot go to a Messages engine
	g2, url2 := testGateway(t, config.Config{Engines: []engines.Config{{Name: "claude", To: up.URL, Models: []string{"c"}, APIs: []string{"anthropic"}}}}.WithDefaults(), nil)
	_ = g2
	resp2, body := postJSON(t, url2, `{"model":"c","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if resp2.StatusCode != 400 || !strings.Contains(body, "untranslatable") || !strings.Contains(body, "engine claude") || !strings.Contains(body, "n cannot be carried") {
		t.Fatalf("%d %s", resp2.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the engine was sent %d requests, want 1", len(got))
	}
}

// A Responses client of a Chat engine whose tool call's arguments run to
// 100 MB: its closing events would repeat them whole, so the translated
// stream is cut the moment what it keeps passes 1 MiB (internal/translate's
// bound), with an in-band error, and the engine's connection is closed
// then, not after it sent all of it (issue 51: each such stream held the
// whole answer, several times over).
func TestATranslatedStreamPastItsBoundIsCutAtOnce(t *testing.T) {
	const total, piece = 100 << 20, 8 << 10
	var sent atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}}]}`+"\n\n")
		ev := []byte(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + strings.Repeat("a", piece) + `"}}]}}]}` + "\n\n")
		for sent.Load() < total {
			if _, err := w.Write(ev); err != nil {
				return // the gateway closed the connection
			}
			sent.Add(piece)
		}
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "chat", To: up.URL, Models: []string{"m"}, APIs: []string{"chat"}}}}.WithDefaults(), nil)

	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(`{"model":"m","stream":true,"input":"write it"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Fatalf("%d, %d bytes, read error %v: want a stream that is cut", resp.StatusCode, len(body), err)
	}
	if len(body) > 2<<20 || !strings.Contains(string(body), "upstream_stream_cut") || !strings.Contains(string(body), "1 MiB") {
		t.Fatalf("%d bytes, ending %q", len(body), body[max(0, len(body)-400):])
	}
	if strings.Contains(string(body), "response.completed") || strings.Contains(string(body), "output_item.done") {
		t.Fatal("the cut stream told the call as whole")
	}
	// the engine wrote what its connection's buffers took after the cut
	// (a few MB on loopback), nowhere near the whole answer
	if n := sent.Load(); n >= total/2 {
		t.Fatalf("the engine sent %d bytes of %d", n, total)
	}
}

// A request is read for translation once, and written once per API and
// model, however many attempts ask: a retry, a failover and a hedge send
// the same bytes, and log the members their API drops once.
func TestARequestIsTranslatedOncePerAPIAndModel(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"},"top_k":3}`)
	req := &request{body: body, op: opMessages, translations: &translations{}}
	first, err := req.translations.written(req, api.Chat, "small")
	if err != nil || !first.first || !strings.Contains(string(first.body), `"model":"small"`) {
		t.Fatalf("first: %s %v %v", first.body, first.first, err)
	}
	again, _ := req.translations.written(req, api.Chat, "small")
	if again.first || &again.body[0] != &first.body[0] || again.conv != first.conv {
		t.Fatal("the second ask for chat/small wrote it again")
	}
	other, _ := req.translations.written(req, api.Responses, "big")
	if !other.first || other.conv != first.conv || !strings.Contains(string(other.body), `"model":"big"`) {
		t.Fatalf("responses/big: %s (read again: %v)", other.body, other.conv != first.conv)
	}
	if len(first.dropped) == 0 || strings.Join(first.dropped, ",") != strings.Join(again.dropped, ",") {
		t.Fatalf("drops %q then %q", first.dropped, again.dropped)
	}
}
