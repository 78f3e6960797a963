package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

func priceLine(t *testing.T, model, in, out string) config.Price {
	t.Helper()
	p := config.Price{Model: model}
	var err error
	if p.Input, err = price.ParseRate(in); err != nil {
		t.Fatal(err)
	}
	if p.Output, err = price.ParseRate(out); err != nil {
		t.Fatal(err)
	}
	return p
}

// cachedUsageEngine answers a chat with 1,000 prompt tokens (600 of them read
// from the cache) and 50 out, as JSON or as a stream.
func cachedUsageEngine(t *testing.T) *httptest.Server {
	const usage = `"usage":{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600}}`
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chunk("u1", "hello")+`data: {"id":"u1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],`+usage+"}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"u1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],`+usage+`}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// 400 fresh prompt tokens at $3, 600 read from the cache at $0.30, 50 out
// at $15 per million: $0.0012 + $0.00018 + $0.00075 = $0.00213. With
// annotate_response on, a JSON answer says so in extra_fields and every
// answer in the X-LLM-Cost trailer.
func TestARequestCostsItsUsageAtItsPriceCachedTokensIncluded(t *testing.T) {
	up := cachedUsageEngine(t)
	line := priceLine(t, "m", "3", "15")
	read := price.Rate(300_000)
	line.CacheRead = &read
	cfg := config.Config{AnnotateResponse: true, Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}, Prices: []config.Price{line}}
	_, url := testGateway(t, cfg, nil)
	for _, stream := range []bool{false, true} {
		drain()
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp, got := postJSON(t, url, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		res := <-served
		if res.Cost.String() != "0.00213" {
			t.Errorf("stream %v: cost %s, want 0.00213", stream, res.Cost)
		}
		if c := resp.Trailer.Get(CostHeader); c != "0.00213" {
			t.Errorf("stream %v: trailer %q (%v)", stream, c, resp.Trailer)
		}
		if !stream && !strings.Contains(got, `"cost_usd":0.00213}`) {
			t.Errorf("extra_fields: %s", got)
		}
	}
}

// An answer that reports no usage costs what it reserved, as its tokens
// are charged: its prompt (about a token per four bytes) at the input
// price and its max_tokens at the output price.
func TestAnAnswerWithoutUsageCostsItsReservation(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "m") }))
	t.Cleanup(up.Close)
	cfg := config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}, Prices: []config.Price{priceLine(t, "e", "1", "10")}}
	_, url := testGateway(t, cfg, nil)
	drain()
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	if resp, got := postJSON(t, url, body); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	res := <-served
	prompt := int64(len(body)/4 + 1)
	want := price.Add(price.Tokens(prompt, 1_000_000), price.Tokens(100, 10_000_000))
	if res.HasUsage || res.Cost != want {
		t.Fatalf("cost %s, want %s (%d prompt tokens at $1, 100 at $10 per million)", res.Cost, want, prompt)
	}
}

// A hedge's loser costs what it is charged in tokens, at its own price:
// a that never answered, its prompt at a's input price; the answer b's
// usage at b's price.
func TestAHedgesLoserCostsItsPromptAtItsPrice(t *testing.T) {
	a := newSilentEngine(t)
	b := cachedUsageEngine(t)
	cfg := hedgeConfig(a.URL, b.URL)
	cfg.Prices = []config.Price{priceLine(t, "a", "100", "100"), priceLine(t, "b", "1", "2")}
	fake := clock.NewFake()
	_, url := testGateway(t, cfg, fake)
	drain()
	body := `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	got := postLater(t, url, body)
	<-a.arrived
	fake.Advance(300 * time.Millisecond)
	if ans := <-got; ans.resp.StatusCode != 200 {
		t.Fatalf("%d %s", ans.resp.StatusCode, ans.body)
	}
	res := <-served
	prompt := int64(len(body)/4 + 1) // the loser's charge in tokens (loserUsage)
	loser := price.Tokens(prompt, 100_000_000)
	answer := price.Add(price.Tokens(1000, 1_000_000), price.Tokens(50, 2_000_000))
	if res.HedgeCost != loser || res.Cost != price.Add(loser, answer) {
		t.Fatalf("cost %s (losers %s), want %s + %s", res.Cost, res.HedgeCost, loser, answer)
	}
}
