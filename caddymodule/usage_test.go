package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// One answer, one charge: each engine API answers the same counts (1,000
// prompt tokens of which 600 were read from its prompt cache, 50 output
// tokens) in its own words, as JSON and as a stream; every client API asks
// it, natively or through translation. Every request must be charged 1,050
// tokens to its key, and its history record, its metrics and its trace
// span must say the same 1,000 in and 50 out: Messages' input_tokens
// leaves the cache's tokens out, and once the gateway charged a Messages
// client 15 tokens where it charged a Chat client 1,015 for one answer.
func TestOneAnswerCostsTheSameWhateverAPIEachSideSpoke(t *testing.T) {
	const key = "usage-key-0123456789abcdef"
	engines := map[string]*recorder{
		"chat":      newRecorder(t, cachedAnswer(chatCached)),
		"messages":  newRecorder(t, cachedAnswer(messagesCached)),
		"responses": newRecorder(t, cachedAnswer(responsesCached)),
	}
	clients := []struct{ api, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":%q,"max_tokens":60,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/v1/messages", `{"model":%q,"max_tokens":60,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":%q,"max_output_tokens":60,"stream":%t,"input":"hi"}`},
	}
	var site strings.Builder
	fmt.Fprintf(&site, "key team %s {\n tokens 10M/d\n}\n", key)
	for api := range engines {
		// and one price, so the cost of each answer is the same too:
		// 400 fresh × $3 + 600 cached × $0.30 + 50 out × $15 per million
		fmt.Fprintf(&site, "price %s input 3 output 15 cache_read 0.30\n", api)
	}
	for api, rec := range engines {
		var models []string
		for _, c := range clients {
			models = append(models, "u-"+api+"-"+c.api+"-json", "u-"+api+"-"+c.api+"-stream")
		}
		fmt.Fprintf(&site, "engine %s {\n to %s\n api %s\n models %s\n}\n", api, rec.URL, api, strings.Join(models, " "))
	}
	otlp := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// Caddy keeps one tracer provider while any config traces, made with
	// the environment of its time: a config without tracing lets go of an
	// earlier one, so the next is made with this receiver's
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")
	startTracedGateway(t, site.String())
	since := fmt.Sprint(time.Now().UnixMilli()) // this test's records: the history outlives a test, and other tests' keys are named team too

	used := func() int64 {
		t.Helper()
		resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys"))
		var keys []quota.KeyUsage
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &keys) != nil {
			t.Fatalf("keys: %d %s", resp.StatusCode, body)
		}
		for _, k := range keys {
			for _, l := range k.Limits {
				if k.Key == "team" && l.Kind == quota.Tokens {
					return l.Used
				}
			}
		}
		t.Fatalf("no token budget for team: %s", body)
		return 0
	}
	for api := range engines {
		for _, c := range clients {
			for _, stream := range []bool{false, true} {
				model := "u-" + api + "-" + c.api + "-" + map[bool]string{false: "json", true: "stream"}[stream]
				before, metrics := used(), scrape(t)
				resp, body := post(t, c.path, fmt.Sprintf(c.body, model, stream), "Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
				if resp.StatusCode != 200 || !strings.Contains(body, "cached answer") {
					t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
				}
				if got := used() - before; got != 1050 {
					t.Errorf("%s: the key was charged %d tokens, want 1050 (1,000 prompt, cached or not, and 50 out)", model, got)
				}
				after := scrape(t)
				for kind, want := range map[string]float64{"prompt": 1000, "completion": 50} {
					labels := `engine="` + api + `",kind="` + kind + `",model="` + model + `"`
					if got := sample(t, after, "llm_gateway_tokens_total", labels) - sample(t, metrics, "llm_gateway_tokens_total", labels); got != want {
						t.Errorf("%s: llm_gateway_tokens_total{kind=%s} grew %v, want %v", model, kind, got, want)
					}
				}
				root, _ := otlp.requestSpan(t, model)
				if in, out := attr(root, "gen_ai.usage.input_tokens"), attr(root, "gen_ai.usage.output_tokens"); in != "1000" || out != "50" {
					t.Errorf("%s: span usage in %s out %s, want 1000 and 50", model, in, out)
				}
				if r := attr(root, "gen_ai.usage.cache_read.input_tokens"); r != "600" {
					t.Errorf("%s: span cache read %q, want 600", model, r)
				}
			}
		}
	}
	syncHistory(t)
	p := historyPage(t, "?key=team&limit=100&since="+since)
	if len(p.Requests) != 18 {
		t.Fatalf("%d records, want 18", len(p.Requests))
	}
	for _, r := range p.Requests {
		if r.TokensIn != 1000 || r.TokensOut != 50 || r.CacheRead != 600 {
			t.Errorf("%s (%s → %s): history tokens in %d out %d cache read %d, want 1000, 50, 600", r.Model, r.API, r.EngineAPI, r.TokensIn, r.TokensOut, r.CacheRead)
		}
		if r.Cost.String() != "0.00213" {
			t.Errorf("%s (%s → %s): cost %s, want 0.00213", r.Model, r.API, r.EngineAPI, r.Cost)
		}
	}
}

// One answer of 1,000 prompt tokens (600 read from the cache) and 50 out,
// in each engine API's words: a JSON answer and its stream.
type cachedWords struct{ json, stream string }

var (
	chatCached = cachedWords{
		json: `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"cached answer"}}],` +
			`"usage":{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600}}}`,
		stream: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"cached answer"}}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600}}}` + "\n\n" +
			"data: [DONE]\n\n",
	}
	// Messages leaves the cache's 600 out of its input_tokens
	messagesCached = cachedWords{
		json: `{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"cached answer"}],"stop_reason":"end_turn","stop_sequence":null,` +
			`"usage":{"input_tokens":400,"cache_read_input_tokens":600,"cache_creation_input_tokens":0,"output_tokens":50}}`,
		stream: "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":400,"cache_read_input_tokens":600,"cache_creation_input_tokens":0,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cached answer"}}` + "\n\n" +
			"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":50}}` + "\n\n" +
			"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n",
	}
	responsesCached = cachedWords{
		json: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"up","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"cached answer","annotations":[]}]}],` +
			`"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1050}}`,
		stream: "event: response.created\ndata: " + `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"up","output":[]}}` + "\n\n" +
			"event: response.output_item.added\ndata: " + `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}` + "\n\n" +
			"event: response.content_part.added\ndata: " + `{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}` + "\n\n" +
			"event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"cached answer"}` + "\n\n" +
			"event: response.output_text.done\ndata: " + `{"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":"cached answer"}` + "\n\n" +
			"event: response.content_part.done\ndata: " + `{"type":"response.content_part.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"cached answer","annotations":[]}}` + "\n\n" +
			"event: response.output_item.done\ndata: " + `{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"cached answer","annotations":[]}]}}` + "\n\n" +
			"event: response.completed\ndata: " + `{"type":"response.completed","sequence_number":7,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"up","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"cached answer","annotations":[]}]}],` +
			`"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1050}}}` + "\n\n",
	}
)

// cachedAnswer answers as the words say, a stream when the request asks
// for one.
func cachedAnswer(words cachedWords) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(b, &body)
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(words.json)))
			io.WriteString(w, words.json)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, words.stream)
	}
}
