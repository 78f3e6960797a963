package handler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// boundGateway is a gateway, not served, over engines that bound their
// answers in each way: a declared max_output_tokens, Messages reached
// through translation, nothing.
func boundGateway(t *testing.T) *Gateway {
	t.Helper()
	cfg := config.Config{
		Keys: []config.Key{
			{Name: "budget", Value: teamKey, Tokens: limits(t, "20000/d", "1M/mo")},
			{Name: "estimate", Value: otherKey, Tokens: limits(t, "20000/d"), Reserve: 2000},
		},
		Engines: []engines.Config{
			{Name: "capped", To: "http://127.0.0.1:1", Models: []string{"capped"}, MaxOutputTokens: 4096},
			{Name: "claude", To: "http://127.0.0.1:1", Models: []string{"claude"}, APIs: []string{"anthropic"}},
			{Name: "plain", To: "http://127.0.0.1:1", Models: []string{"plain", "embed"}},
			{Name: "capped-to-plain", To: "http://127.0.0.1:1", Models: []string{"capped-to-plain"}, MaxOutputTokens: 512, Fallback: "plain"},
		},
		Pools: []config.PoolConfig{{Name: "mixed", Members: []string{"capped", "plain"}}, {Name: "bounded", Members: []string{"capped", "claude"}}},
	}.WithDefaults()
	var es []*engines.Engine
	for _, ec := range cfg.Engines {
		e, err := engines.New(ec, &http.Transport{}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Destruct() })
		es = append(es, e)
	}
	g, err := New(cfg, es, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A request of a key with a token budget that names no limit reserves what
// its engines may generate: a declared cap, the limit the gateway sends
// toward Messages, the key's own estimate, or, where nothing bounds the
// answer, minAnswer and alone (every budget whole).
func TestARequestNamingNoLimitReservesWhatItsEnginesMayGenerate(t *testing.T) {
	g := boundGateway(t)
	ring := keys.NewRing(config.SplitKeys([]config.Key{
		{Name: "budget", Value: teamKey, Tokens: limits(t, "20000/d", "1M/mo")},
		{Name: "estimate", Value: otherKey, Tokens: limits(t, "20000/d"), Reserve: 2000},
	}))
	budget, estimate := ring.Rules[0], ring.Rules[1]
	for _, c := range []struct {
		name, path, body string
		key              *keys.Rules
		answer           int64 // the reservation less the prompt; -1: minAnswer, alone
	}{
		{"a declared cap", "/v1/chat/completions", `{"model":"capped","messages":[]}`, budget, 4096},
		{"toward Messages, the limit the gateway sends", "/v1/chat/completions", `{"model":"claude","messages":[]}`, budget, translate.DefaultMaxTokens},
		{"nothing bounds it", "/v1/chat/completions", `{"model":"plain","messages":[]}`, budget, -1},
		{"a fallback nothing bounds", "/v1/chat/completions", `{"model":"capped-to-plain","messages":[]}`, budget, -1},
		{"a body fallback nothing bounds", "/v1/chat/completions", `{"model":"capped","messages":[],"fallbacks":["plain"]}`, budget, -1},
		{"a pool with an unbounded member", "/v1/chat/completions", `{"model":"mixed","messages":[]}`, budget, -1},
		{"a pool of bounded members: the largest", "/v1/chat/completions", `{"model":"bounded","messages":[]}`, budget, translate.DefaultMaxTokens},
		{"engine/model", "/v1/chat/completions", `{"model":"capped/capped","messages":[]}`, budget, 4096},
		{"the key's own estimate", "/v1/chat/completions", `{"model":"plain","messages":[]}`, estimate, 2000},
		{"embeddings answer no tokens", "/v1/embeddings", `{"model":"embed","input":"x"}`, budget, 0},
		{"a limit the body names", "/v1/chat/completions", `{"model":"plain","max_tokens":300,"messages":[]}`, budget, 300},
		{"choices multiply it", "/v1/chat/completions", `{"model":"capped","n":3,"messages":[]}`, budget, 3 * 4096},
	} {
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		req, gerr := g.readRequest(httptest.NewRecorder(), r, &Result{op: operationOf(c.path, false), body: bodyHold{b: g.bodies}})
		if gerr != nil {
			t.Fatalf("%s: %v", c.name, gerr)
		}
		req.key = c.key
		est, alone := g.estimateTokens(req)
		want := c.answer
		if want < 0 {
			want = minAnswer
		}
		if got := est - promptTokens(req); got != want || alone != (c.answer < 0) {
			t.Errorf("%s: reserves %d for the answer, alone %v; want %d", c.name, got, alone, c.answer)
		}
	}
}
