package handler

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Money budgets and teams, below Caddy, on fake time. The engine "big"
// answers 600 tokens (300 in, 300 out) and is priced $2,000 per million
// output tokens, nothing for input: each answer costs $0.60, and a request
// naming max_tokens 300 reserves $0.60 while it is in flight.

const moneyAsk = `{"model":"big","max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`

func spends(t *testing.T, specs ...string) []quota.SpendLimit {
	t.Helper()
	var out []quota.SpendLimit
	for _, s := range specs {
		l, err := quota.ParseSpend(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// moneyGateway serves keys and teams over big (priced) and small (free).
func moneyGateway(t *testing.T, clock *clock.Fake, ks []config.Key, teams []config.Team) (url string, big, small *usageEngine) {
	t.Helper()
	big, small = newUsageEngine(t, "big", 600), newUsageEngine(t, "small", 600)
	out, err := price.ParseRate("2000")
	if err != nil {
		t.Fatal(err)
	}
	url = budgetGateway(t, config.Config{
		Keys: ks, Teams: teams,
		Engines: []engines.Config{
			{Name: "big", To: big.URL, Models: []string{"big"}},
			{Name: "small", To: small.URL, Models: []string{"small"}},
		},
		Prices: []config.Price{{Model: "big", Output: out}},
	}, clock)
	return url, big, small
}

func TestSpentMoneyBudgetGoesToTheFreeModelUntilItRenews(t *testing.T) {
	clock := clock.NewFake()
	url, big, small := moneyGateway(t, clock, []config.Key{{Name: "alice", Value: teamKey, Spend: spends(t, "1/d"), OverBudgetFallback: "small"}}, nil)
	auth := "Bearer " + teamKey
	resp, body := postJSON(t, url, moneyAsk, "Authorization", auth)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "big" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	// the headers say what is left of the dollar while it is in flight
	if h := resp.Header; h.Get("X-Ratelimit-Limit-Spend") != "1.00" || h.Get("X-Ratelimit-Remaining-Spend") != "0.40" || h.Get("X-Ratelimit-Reset-Spend") == "" {
		t.Fatalf("%v", h)
	}
	if res := lastResult.Load(); res.Cost.String() != "0.60" {
		t.Fatalf("cost %s", res.Cost)
	}
	// $0.60 spent: another $0.60 does not fit, the free model answers
	resp, body = postJSON(t, url, moneyAsk, "Authorization", auth)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "small" || resp.Header.Get("X-LLM-Fallback") != "small" || !strings.Contains(body, "from small") {
		t.Fatalf("over budget: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got := resp.Header.Get("X-Ratelimit-Remaining-Spend"); got != "0.40" {
		t.Fatalf("remaining %q", got)
	}
	if big.calls() != 1 || small.calls() != 1 || !strings.Contains(small.bodies[0], `"model":"small"`) {
		t.Fatalf("big %d, small %d calls", big.calls(), small.calls())
	}
	// the next day the budget is whole again
	clock.Advance(24 * time.Hour)
	if resp, _ := postJSON(t, url, moneyAsk, "Authorization", auth); resp.Header.Get("X-LLM-Engine") != "big" {
		t.Fatalf("the next day: %v", resp.Header)
	}
}

func TestSpentMoneyBudgetWithoutFallbackIsInsufficientQuota(t *testing.T) {
	clock := clock.NewFake()
	url, _, _ := moneyGateway(t, clock, []config.Key{{Name: "alice", Value: teamKey, Spend: spends(t, "1/d")}}, nil)
	postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey)
	resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey)
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"insufficient_quota"`) || !strings.Contains(body, "key alice has spent its money budget ($1/d)") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if res := lastResult.Load(); res.Refused != "spend" || res.KeyName != "alice" {
		t.Fatalf("%+v", res)
	}
}

// A team's budget is one for all its keys: what alice spent, bob cannot;
// the team's over_budget sends bob to the free model, and a key's own
// over_budget wins over the team's.
func TestATeamsKeysShareItsMoneyBudget(t *testing.T) {
	clock := clock.NewFake()
	url, big, _ := moneyGateway(t, clock, []config.Key{
		{Name: "alice", Value: teamKey, Team: "eng"},
		{Name: "bob", Value: otherKey, Team: "eng"},
	}, []config.Team{{Name: "eng", Spend: spends(t, "1/d")}})
	if resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey); resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining-Spend") != "0.40" {
		t.Fatalf("alice: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+otherKey)
	if resp.StatusCode != 429 || !strings.Contains(body, "team eng has spent its money budget ($1/d)") {
		t.Fatalf("bob: %d %s", resp.StatusCode, body)
	}
	if big.calls() != 1 {
		t.Fatalf("big got %d calls", big.calls())
	}

	url, _, small := moneyGateway(t, clock, []config.Key{
		{Name: "alice", Value: teamKey, Team: "eng", Spend: spends(t, "10/d"), OverBudgetFallback: "small"},
		{Name: "bob", Value: otherKey, Team: "eng"},
	}, []config.Team{{Name: "eng", Spend: spends(t, "1/d"), OverBudgetFallback: "small"}})
	postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey)
	for _, key := range []string{otherKey, teamKey} {
		if resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+key); resp.Header.Get("X-LLM-Engine") != "small" {
			t.Fatalf("over the team's budget: %d %v %s", resp.StatusCode, resp.Header, body)
		}
	}
	if small.calls() != 2 {
		t.Fatalf("small got %d calls", small.calls())
	}
}

// A team's rate counts every member's requests, and its refusal names the
// team.
func TestATeamsRateCountsEveryMember(t *testing.T) {
	clock := clock.NewFake()
	url, _, _ := moneyGateway(t, clock, []config.Key{
		{Name: "alice", Value: teamKey, Team: "eng"},
		{Name: "bob", Value: otherKey, Team: "eng"},
	}, []config.Team{{Name: "eng", Rate: limits(t, "2/d")}})
	for _, key := range []string{teamKey, otherKey} {
		if resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	resp, body := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey)
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"rate_limit_exceeded"`) || !strings.Contains(body, "team eng is over its rate limit (2/d)") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// the model list is a request like the others
	if st, body := call(t, url, otherKey, http.MethodGet, "/v1/models", ""); st != 429 {
		t.Fatalf("GET /v1/models: %d %s", st, body)
	}
}

// What a request reserves in money: its most tokens at the dearest price
// of what it may reach (here its fallback's), the prompt at the input price.
func TestAMoneyReservationIsAtTheDearestReachablePrice(t *testing.T) {
	clock := clock.NewFake()
	big, dear := newUsageEngine(t, "big", 600), newUsageEngine(t, "dear", 600)
	rate := func(s string) price.Rate {
		r, err := price.ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "alice", Value: teamKey, Spend: spends(t, "10/d")}},
		Engines: []engines.Config{
			{Name: "big", To: big.URL, Models: []string{"big"}, Fallback: "dear"},
			{Name: "dear", To: dear.URL, Models: []string{"dear"}},
		},
		Prices: []config.Price{{Model: "big", Output: rate("2000")}, {Model: "dear", Input: rate("1000"), Output: rate("5000")}},
	}, clock)
	resp, _ := postJSON(t, url, moneyAsk, "Authorization", "Bearer "+teamKey)
	// 300 × $5,000 per million = $1.50 of answer, the prompt at $1,000 per million
	prompt := price.Tokens(int64(len(moneyAsk)/4+1), rate("1000"))
	want := 10*price.Dollar - 1_500_000_000 - prompt
	if got := resp.Header.Get("X-Ratelimit-Remaining-Spend"); got != want.String() {
		t.Fatalf("remaining %s, want %s", got, want)
	}
}

// A key's budget thresholds reach the log once each: 50 % and 80 % of its
// dollar, at $0.30 an answer.
func TestBudgetThresholdsAreLoggedOnceEach(t *testing.T) {
	clock := clock.NewFake()
	big := newUsageEngine(t, "big", 300) // 150 out: $0.30
	out, _ := price.ParseRate("2000")
	cfg := config.Config{
		Keys:    []config.Key{{Name: "alice", Value: teamKey, Spend: spends(t, "1/d")}},
		Engines: []engines.Config{{Name: "big", To: big.URL, Models: []string{"big"}}},
		Prices:  []config.Price{{Model: "big", Output: out}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	lim, err := quota.Open(quota.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	g, url := testGateway(t, cfg, clock)
	g.SetLimiter(lim)
	core, logs := observer.New(zapcore.InfoLevel)
	g.log = zap.New(core)
	var told []string
	for range 4 {
		postJSON(t, url, `{"model":"big","max_tokens":150,"messages":[]}`, "Authorization", "Bearer "+teamKey)
		for _, e := range logs.TakeAll() {
			if e.Message == "a budget passed a threshold" {
				f := e.ContextMap()
				told = append(told, fmt.Sprintf("%s %s %s %d%% %s", f["key"], f["kind"], f["limit"], f["percent"], f["used"]))
			}
		}
	}
	if got := fmt.Sprint(told); got != "[alice spend 1/d 50% 0.60 alice spend 1/d 80% 0.90]" {
		t.Fatalf("%s", got)
	}
}
