package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Keys that carry rules, below Caddy, on fake time.

func TestRateLimitedKeyGets429WithAnHonestRetryAfter(t *testing.T) {
	big := newUsageEngine(t, "big", 10)
	clock := clock.NewFake()
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Rate: limits(t, "5/m")}, {Name: "free", Value: otherKey}},
		Engines: []engines.Config{
			{Name: "big", To: big.URL, Models: []string{"big"}, Fallback: "spare"},
			{Name: "spare", To: big.URL, Models: []string{"spare"}},
		},
	}, clock)
	auth := "Bearer " + teamKey
	for i := range 5 {
		resp, body := postJSON(t, url, `{"model":"big","messages":[]}`, "Authorization", auth)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Ratelimit-Remaining-Requests"); got != strconv.Itoa(4-i) || resp.Header.Get("X-Ratelimit-Limit-Requests") != "5" {
			t.Fatalf("request %d: remaining %q, limit %q", i+1, got, resp.Header.Get("X-Ratelimit-Limit-Requests"))
		}
	}
	resp, body := postJSON(t, url, `{"model":"big","messages":[]}`, "Authorization", auth)
	now := clock.Now()
	want := int(now.Truncate(time.Minute).Add(time.Minute).Sub(now).Seconds() + 0.999) // to the second, up
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"rate_limit_exceeded"`) || resp.Header.Get("Retry-After") != strconv.Itoa(want) {
		t.Fatalf("%d Retry-After %q (want %d) %s", resp.StatusCode, resp.Header.Get("Retry-After"), want, body)
	}
	if big.calls() != 5 {
		t.Fatalf("the refusal reached an engine or its fallback: %d calls", big.calls())
	}
	// another key is not limited by team-a's
	if resp, _ := postJSON(t, url, `{"model":"big","messages":[]}`, "Authorization", "Bearer "+otherKey); resp.StatusCode != 200 {
		t.Fatalf("the other key: %d", resp.StatusCode)
	}
	// the next window admits again
	clock.Advance(time.Minute)
	if resp, body := postJSON(t, url, `{"model":"big","messages":[]}`, "Authorization", auth); resp.StatusCode != 200 {
		t.Fatalf("next minute: %d %s", resp.StatusCode, body)
	}
}

func TestSpentTokenBudgetGoesToTheCheaperModel(t *testing.T) {
	big := newUsageEngine(t, "big", 600)
	small := newUsageEngine(t, "small", 600)
	clock := clock.NewFake()
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "1000/d"), OverBudgetFallback: "small"}},
		Engines: []engines.Config{
			{Name: "big", To: big.URL, Models: []string{"big"}},
			{Name: "small", To: small.URL, Models: []string{"small"}},
		},
	}, clock)
	auth := "Bearer " + teamKey
	ask := func(stream bool) (*http.Response, string) {
		t.Helper()
		body := `{"model":"big","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"big","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp, out := postJSON(t, url, body, "Authorization", auth)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return resp, out
	}
	// a stream of 600 tokens: the gateway asks for its usage, and the
	// client, which did not, never sees the usage chunk
	resp, out := ask(true)
	if resp.Header.Get("X-LLM-Engine") != "big" || strings.Contains(out, `"usage"`) || !strings.Contains(out, "[DONE]") {
		t.Fatalf("%v\n%s", resp.Header, out)
	}
	if !strings.Contains(big.bodies[0], `"stream_options":{"include_usage":true}`) {
		t.Fatalf("the engine was not asked for usage: %s", big.bodies[0])
	}
	if lastResult.Load().Usage.Input+lastResult.Load().Usage.Output != 600 {
		t.Fatalf("usage %+v", lastResult.Load().Usage)
	}
	resp, _ = ask(false) // 1200 of 1000 after this one
	if resp.Header.Get("X-LLM-Engine") != "big" || resp.Header.Get("X-Ratelimit-Limit-Tokens") != "1000" ||
		resp.Header.Get("X-Ratelimit-Limit-Requests") == "999999" {
		t.Fatalf("%v", resp.Header)
	}
	for _, stream := range []bool{false, true} {
		resp, out = ask(stream)
		if resp.Header.Get("X-LLM-Engine") != "small" || !strings.Contains(out, "from small") {
			t.Fatalf("over budget, stream %v: %v %s", stream, resp.Header, out)
		}
		if stream {
			if got := resp.Trailer.Get("X-LLM-Fallback") + resp.Header.Get("X-LLM-Fallback"); got != "small" {
				t.Fatalf("X-LLM-Fallback %q", got)
			}
		} else if resp.Header.Get("X-LLM-Fallback") != "small" {
			t.Fatalf("X-LLM-Fallback %q", resp.Header.Get("X-LLM-Fallback"))
		}
	}
	if !strings.Contains(small.bodies[0], `"model":"small"`) {
		t.Fatalf("the cheaper model was sent %s", small.bodies[0])
	}
	if big.calls() != 2 {
		t.Fatalf("big got %d calls", big.calls())
	}
}

func TestSpentTokenBudgetWithoutFallbackIsInsufficientQuota(t *testing.T) {
	big := newUsageEngine(t, "big", 600)
	clock := clock.NewFake()
	url := budgetGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "1000/d")}},
		Engines: []engines.Config{{Name: "big", To: big.URL, Models: []string{"big"}}},
	}, clock)
	for range 2 {
		postJSON(t, url, `{"model":"big"}`, "Authorization", "Bearer "+teamKey)
	}
	resp, body := postJSON(t, url, `{"model":"big"}`, "Authorization", "Bearer "+teamKey)
	if resp.StatusCode != 429 || !strings.Contains(body, `"type":"insufficient_quota"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if res := lastResult.Load(); res.Refused != "tokens" || res.KeyName != "team-a" {
		t.Fatalf("%+v", res)
	}
}

func TestKeyMayUseOnlyItsModels(t *testing.T) {
	up := newUsageEngine(t, "x", 2)
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"qwen", "auto"}}},
		Engines: []engines.Config{
			{Name: "qwen", To: up.URL, Models: []string{"qwen"}},
			{Name: "gpt", To: up.URL, Models: []string{"gpt-4o"}},
		},
		Pools: []config.PoolConfig{{Name: "auto", Members: []string{"qwen"}}},
	}, clock.NewFake())
	auth := "Bearer " + teamKey
	resp, body := postJSON(t, url, `{"model":"gpt-4o"}`, "Authorization", auth)
	if resp.StatusCode != 403 || !strings.Contains(body, `"code":"model_not_allowed"`) || !strings.Contains(body, "it may use: qwen, auto") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = postJSON(t, url, `{"model":"qwen","fallbacks":["gpt"]}`, "Authorization", auth)
	if resp.StatusCode != 403 || !strings.Contains(body, "model_not_allowed") {
		t.Fatalf("through body fallbacks: %d %s", resp.StatusCode, body)
	}
	if up.calls() != 0 {
		t.Fatal("a refused request reached an engine")
	}
	for _, m := range []string{"qwen", "auto"} {
		if resp, body := postJSON(t, url, `{"model":"`+m+`"}`, "Authorization", auth); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(list), "gpt-4o") || !strings.Contains(string(list), `"id":"qwen"`) || !strings.Contains(string(list), `"id":"auto"`) {
		t.Fatalf("%s", list)
	}
	req, _ = http.NewRequest(http.MethodGet, url+"/v1/models/gpt-4o", nil)
	req.Header.Set("Authorization", auth)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("a model the key may not use: %d", resp.StatusCode)
	}
}

func BenchmarkKeyWithLimits(b *testing.B) {
	for _, tc := range []struct {
		name string
		key  config.Key
	}{
		{"no limits", config.Key{Name: "k", Value: teamKey}},
		{"rate and two budgets", config.Key{Name: "k", Value: teamKey, Rate: []quota.Limit{{N: 1 << 40, Window: quota.Minute}},
			Tokens: []quota.Limit{{N: 1 << 50, Window: quota.Day}, {N: 1 << 55, Window: quota.Month}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lim, _ := quota.Open(quota.Config{})
			defer lim.Close()
			// the key rules' part of a request: admit, then charge
			kr := keys.NewRing([]config.Key{tc.key}).Rules[0]
			g := &Gateway{limiter: lim}
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":100}`)
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				req := &request{r: r, body: body, model: "m", key: kr}
				var res Result
				req, tk, gerr := g.reserve(w, req, &res)
				if gerr != nil {
					b.Fatal(gerr)
				}
				res.Status, res.HasUsage, res.Usage = 200, true, api.Usage{Input: 10, Output: 20}
				g.charge(w, tk, req, &res)
			}
		})
	}
}

func TestAnUploadReservesNoTokensForItsFile(t *testing.T) {
	body, ct := multipartBody(t, [][2]string{{"model", "whisper"}}, make([]byte, 4<<20))
	r := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", ct)
	req, gerr := readForm(r, body, strings.TrimPrefix(ct, "multipart/form-data; boundary="))
	if gerr != nil {
		t.Fatal(gerr)
	}
	// a key with 10k tokens a day may still upload 4 MB of audio
	g := &Gateway{}
	if est, _ := g.estimateTokens(req); est != 1 {
		t.Fatalf("a 4 MB upload reserves %d tokens", est)
	}
	chat := &request{body: []byte(`{"model":"m","max_tokens":100,"messages":[]}`)}
	if err := chat.fields.Scan(chat.body, jsonmember.Request); err != nil {
		t.Fatal(err)
	}
	if chat.counts, gerr = readCounts(chat.body, &chat.fields); gerr != nil {
		t.Fatal(gerr)
	}
	if est, _ := g.estimateTokens(chat); est != 12+100 {
		t.Fatalf("a chat request reserves %d tokens", est)
	}
}
