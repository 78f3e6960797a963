package keys

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

const (
	teamToken  = "team-token-0123456789"
	team2Token = "team-token-abcdefghij"
	adminToken = "admin-token-0123456789"
)

// ring is a keyring of a restricted key with two tokens, and an
// unrestricted unnamed one.
func ring() *Ring {
	return NewRing([]config.Key{
		{Name: "team", Value: teamToken, Models: []string{"small", "pool"}, Reserve: 300, Priority: 2, OverBudgetFallback: "small"},
		{Name: "team", Value: team2Token, Models: []string{"small", "pool"}},
		{Value: adminToken},
	})
}

func request(header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

// TestCheckFindsTheTokenWhereEachSDKPutsIt: the OpenAI SDKs send
// Authorization: Bearer, Anthropic's X-Api-Key, Azure's Api-Key. A token
// matches whole or not at all: it is compared as a SHA-256 digest, in
// constant time, against every key.
func TestCheckFindsTheTokenWhereEachSDKPutsIt(t *testing.T) {
	t.Parallel()
	k := ring()
	for _, tc := range []struct {
		name   string
		header []string
		ok     bool
		rules  string // the name of the rules matched, "-" for none
	}{
		{"bearer", []string{"Authorization", "Bearer " + teamToken}, true, "team"},
		{"bearer in any case", []string{"Authorization", "bEARER " + teamToken}, true, "team"},
		{"bearer with spaces around the token", []string{"Authorization", "Bearer   " + teamToken + " "}, true, "team"},
		{"the second token of a name", []string{"Authorization", "Bearer " + team2Token}, true, "team"},
		{"an unnamed key", []string{"Authorization", "Bearer " + adminToken}, true, ""},
		{"x-api-key", []string{"X-Api-Key", teamToken}, true, "team"},
		{"api-key", []string{"Api-Key", teamToken}, true, "team"},
		{"no key", nil, false, "-"},
		{"a wrong key", []string{"Authorization", "Bearer wrong-token-0123456789"}, false, "-"},
		{"a prefix of a key", []string{"Authorization", "Bearer " + teamToken[:10]}, false, "-"},
		{"a key and more", []string{"Authorization", "Bearer " + teamToken + "x"}, false, "-"},
		{"a key in another case", []string{"Authorization", "Bearer " + strings.ToUpper(teamToken)}, false, "-"},
		{"basic, not bearer", []string{"Authorization", "Basic " + teamToken}, false, "-"},
		{"a bare token in Authorization", []string{"Authorization", teamToken}, false, "-"},
		{"bearer without a token", []string{"Authorization", "Bearer "}, false, "-"},
		{"a bearer that is wrong outranks x-api-key", []string{"Authorization", "Bearer wrong-token-0123456789", "X-Api-Key", teamToken}, false, "-"},
		{"x-api-key outranks api-key", []string{"X-Api-Key", "wrong-token-0123456789", "Api-Key", teamToken}, false, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kr, ok := k.Check(request(tc.header...))
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			name := "-"
			if kr != nil {
				name = kr.Name
			}
			if name != tc.rules {
				t.Fatalf("rules %q, want %q", name, tc.rules)
			}
		})
	}
}

// Without keys there is no authentication: every request passes, with no
// rules, and no rules allow everything.
func TestANilRingAcceptsEveryone(t *testing.T) {
	t.Parallel()
	k := NewRing(nil)
	if k != nil {
		t.Fatalf("no keys made a ring: %+v", k)
	}
	kr, ok := k.Check(request())
	if !ok || kr != nil {
		t.Fatalf("%+v %v", kr, ok)
	}
	if !kr.Allows("anything") || !kr.AllowsAll() || kr.Reserve() != 0 {
		t.Fatal("nil rules restrict")
	}
	if got := kr.Only([]string{"a", "b"}); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("%v", got)
	}
}

// Every token of a name shares one set of rules (so one rate limit); two
// unnamed keys are two sets.
func TestTheTokensOfANameShareTheirRules(t *testing.T) {
	t.Parallel()
	k := NewRing([]config.Key{
		{Name: "team", Value: teamToken}, {Name: "team", Value: team2Token},
		{Value: adminToken}, {Value: "admin-token-abcdefghij"},
	})
	if len(k.Rules) != 4 || k.Rules[0] != k.Rules[1] {
		t.Fatal("the tokens of team have two sets of rules")
	}
	if k.Rules[2] == k.Rules[3] {
		t.Fatal("two unnamed keys share their rules")
	}
}

// A key's scope is its name; an unnamed key's is its own, the same after a
// reload, and holds neither its token nor anything a name can spell.
func TestAnUnnamedKeyIsAScopeOfItsOwn(t *testing.T) {
	t.Parallel()
	cfg := []config.Key{{Name: "team", Value: teamToken}, {Name: "team", Value: team2Token}, {Value: adminToken}, {Value: "admin-token-abcdefghij"}}
	k, again := NewRing(cfg), NewRing(cfg)
	if k.Rules[0].Scope() != "team" || k.Rules[1].Scope() != "team" {
		t.Fatalf("a named key's scope: %q", k.Rules[0].Scope())
	}
	a, b := k.Rules[2].Scope(), k.Rules[3].Scope()
	if a == "" || a == b || a != again.Rules[2].Scope() || b != again.Rules[3].Scope() {
		t.Fatalf("unnamed scopes %q and %q, after a reload %q and %q", a, b, again.Rules[2].Scope(), again.Rules[3].Scope())
	}
	if strings.Contains(a, adminToken) || a[0] != 0 {
		t.Fatalf("an unnamed key's scope %q", a)
	}
	if (*Rules)(nil).Scope() != "" {
		t.Fatal("no key has a scope")
	}
}

func TestAllowsOnlyTheKeysModels(t *testing.T) {
	t.Parallel()
	kr := ring().Rules[0]
	for model, want := range map[string]bool{"small": true, "pool": true, "large": false, "": false, "Small": false} {
		if got := kr.Allows(model); got != want {
			t.Errorf("Allows(%q) = %v, want %v", model, got, want)
		}
	}
	if kr.AllowsAll() {
		t.Error("a restricted key allows all")
	}
	admin := ring().Rules[2]
	if !admin.Allows("large") || !admin.AllowsAll() {
		t.Error("a key without models is restricted")
	}
}

// A restricted key's errors list what it may ask for, in the order given,
// not every model of the gateway.
func TestOnlyKeepsWhatTheKeyMayUse(t *testing.T) {
	t.Parallel()
	kr := ring().Rules[0]
	if got := kr.Only([]string{"large", "pool", "other", "small"}); !reflect.DeepEqual(got, []string{"pool", "small"}) {
		t.Fatalf("%v", got)
	}
	if got := kr.Only([]string{"large"}); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	if got := ring().Rules[2].Only([]string{"large"}); !reflect.DeepEqual(got, []string{"large"}) {
		t.Fatalf("an unrestricted key: %v", got)
	}
}

func TestReserveIsTheKeysOrNone(t *testing.T) {
	t.Parallel()
	k := ring()
	if got := k.Rules[0].Reserve(); got != 300 {
		t.Errorf("team: %d", got)
	}
	if got := k.Rules[2].Reserve(); got != 0 {
		t.Errorf("unset: %d", got)
	}
	if k.Rules[0].Priority != 2 || k.Rules[0].OverBudget != "small" {
		t.Errorf("%+v", k.Rules[0])
	}
}

// The refusal names the key, quotes the model (cut at 256 bytes: an error
// never echoes a huge value whole) and lists what the key may use.
func TestNotAllowedNamesTheKeyAndWhatItMayUse(t *testing.T) {
	t.Parallel()
	kr := ring().Rules[0]
	e := kr.NotAllowed("large")
	if e.Status != http.StatusForbidden || e.Type != apierror.TypeInvalidRequest || e.Code != "model_not_allowed" {
		t.Fatalf("%+v", e)
	}
	if want := `key team may not use the model "large"; it may use: small, pool`; e.Message != want {
		t.Fatalf("%q\nwant %q", e.Message, want)
	}
	huge := strings.Repeat("x", 10000)
	e = kr.NotAllowed(huge)
	if strings.Contains(e.Message, huge[:257]) || !strings.Contains(e.Message, huge[:256]+"…") {
		t.Fatalf("a huge model is echoed: %d bytes", len(e.Message))
	}
}

func TestLimitsOf(t *testing.T) {
	t.Parallel()
	var ls []quota.Limit
	for _, s := range []string{"60/m", "200k/d"} {
		l, err := quota.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if got, want := LimitsOf(ls), ls[0].String()+", "+ls[1].String(); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if LimitsOf(nil) != "" {
		t.Fatal("no limits")
	}
}

// RateHeaders are OpenAI's x-ratelimit-* for the kinds a key has a limit
// of: remaining never below 0, the reset as OpenAI writes it.
func TestRateHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    quota.Decision
		want http.Header
	}{
		{"no limits", quota.Decision{OK: true}, http.Header{}},
		{"requests only", quota.Decision{Requests: quota.Headroom{Limit: 60, Remaining: 59, Reset: 59*time.Second + 400*time.Millisecond}}, http.Header{
			"X-Ratelimit-Limit-Requests": {"60"}, "X-Ratelimit-Remaining-Requests": {"59"}, "X-Ratelimit-Reset-Requests": {"59s"},
		}},
		{"both, one spent past its limit", quota.Decision{
			Requests: quota.Headroom{Limit: 10, Remaining: 0, Reset: 6 * time.Minute},
			Tokens:   quota.Headroom{Limit: 200000, Remaining: -500, Reset: 2*time.Hour + 3*time.Minute},
		}, http.Header{
			"X-Ratelimit-Limit-Requests": {"10"}, "X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"6m0s"},
			"X-Ratelimit-Limit-Tokens": {"200000"}, "X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"2h3m0s"},
		}},
		{"a reset under a second", quota.Decision{Tokens: quota.Headroom{Limit: 5, Remaining: 5, Reset: 300 * time.Millisecond}}, http.Header{
			"X-Ratelimit-Limit-Tokens": {"5"}, "X-Ratelimit-Remaining-Tokens": {"5"}, "X-Ratelimit-Reset-Tokens": {"0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := RateHeaders(tc.d); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%v\nwant %v", got, tc.want)
			}
		})
	}
}
