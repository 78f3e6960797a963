package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Every row of the verdict table.
func TestVerdictTable(t *testing.T) {
	pol := policy{retryAfterMax: 5 * time.Second, hangupGrace: 10 * time.Second}
	type row struct {
		j                                judgement
		attempt, answered, retry, moveOn bool
		effect                           effect
		scope                            scope
		reason                           string
	}
	rows := map[string]row{
		"good":                  {j: judgement{outcome: outcomeGood}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "ok"},
		"connect":               {j: judgement{outcome: outcomeConnect}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "connect"},
		"dns":                   {j: judgement{outcome: outcomeDNS}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "dns"},
		"instant reset":         {j: judgement{outcome: outcomeClosed, silence: time.Millisecond}, attempt: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "closed"},
		"hang-up after silence": {j: judgement{outcome: outcomeClosed, silence: 15 * time.Second}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "closed"},
		"timeout":               {j: judgement{outcome: outcomeTimeout}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "timeout"},
		"stream error":          {j: judgement{outcome: outcomeStreamError}, attempt: true, answered: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "stream-error"},
		"400":                   {j: judgement{outcome: outcomeStatus, status: 400}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "400"},
		"422":                   {j: judgement{outcome: outcomeStatus, status: 422}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "422"},
		"401":                   {j: judgement{outcome: outcomeStatus, status: 401}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "401"},
		"403":                   {j: judgement{outcome: outcomeStatus, status: 403}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "403"},
		"404":                   {j: judgement{outcome: outcomeStatus, status: 404}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "404"},
		"408":                   {j: judgement{outcome: outcomeStatus, status: 408}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "408"},
		"429":                   {j: judgement{outcome: outcomeStatus, status: 429}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "429"},
		"429 long Retry-After":  {j: judgement{outcome: outcomeStatus, status: 429, retryAfter: time.Minute}, attempt: true, answered: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "429"},
		"500":                   {j: judgement{outcome: outcomeStatus, status: 500}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "500"},
		"502":                   {j: judgement{outcome: outcomeStatus, status: 502}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "502"},
		"503":                   {j: judgement{outcome: outcomeStatus, status: 503}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "503"},
		"504":                   {j: judgement{outcome: outcomeStatus, status: 504}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "504"},
		"418":                   {j: judgement{outcome: outcomeStatus, status: 418}, attempt: true, answered: true, effect: effectAbandon, scope: scopeModel, reason: "418"},
		"start failed":          {j: judgement{outcome: outcomeStart}, moveOn: true, reason: "start"},
		"not running":           {j: judgement{outcome: outcomeNotRunning}, moveOn: true, reason: "stopped"},
		"slow start":            {j: judgement{outcome: outcomeSlow}, moveOn: true, reason: "slow"},
		"breaker open":          {j: judgement{outcome: outcomeOpen}, moveOn: true, reason: "open"},
		"busy":                  {j: judgement{outcome: outcomeBusy}, moveOn: true, reason: "busy"},
		"client went away":      {j: judgement{outcome: outcomeCanceled}, effect: effectAbandon, scope: scopeModel, reason: "canceled"},
	}
	for name, r := range rows {
		v := judge(r.j, pol)
		want := verdict{attempt: r.attempt, answered: r.answered, effect: r.effect, scope: r.scope, retry: r.retry, moveOn: r.moveOn, reason: r.reason}
		if v != want {
			t.Errorf("%s: got %+v, want %+v", name, v, want)
		}
	}
}

// settle puts a verdict on the breaker of its scope, and nothing else.
func TestSettleTouchesOnlyTheBreakerOfTheVerdictsScope(t *testing.T) {
	e, err := engines.New(engines.Config{Name: "e", To: "http://127.0.0.1:1", Models: []string{"a", "b"}, BreakerFailures: 1}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destruct()
	c := candidate{rt: &route{eng: e, cfg: e.Config()}, role: rolePrimary}
	pol := c.policy()

	tk, ok := c.admit("a")
	if !ok {
		t.Fatal("refused")
	}
	tk.settle(judge(judgement{outcome: outcomeStatus, status: 503}, pol))
	if e.ModelBreaker("a").State() != engines.BreakerOpen || e.Breaker().State() != engines.BreakerClosed {
		t.Fatalf("a 503 of model a: model %s, engine %s", e.ModelBreaker("a").State(), e.Breaker().State())
	}
	if _, ok := c.admit("a"); ok {
		t.Fatal("model a's open breaker let a request through")
	}
	tk, ok = c.admit("b")
	if !ok {
		t.Fatal("model a's breaker kept model b away")
	}
	tk.settle(judge(judgement{outcome: outcomeConnect}, pol))
	if e.Breaker().State() != engines.BreakerOpen || e.ModelBreaker("b").State() != engines.BreakerClosed {
		t.Fatalf("a connect failure: engine %s, model b %s", e.Breaker().State(), e.ModelBreaker("b").State())
	}
	if _, ok := c.admit("b"); ok {
		t.Fatal("the engine's open breaker let a request through")
	}
}

// fakeAttempt is an attempt with only what the planner reads.
func fakeAttempt(c candidate, o outcome) *attempt {
	return &attempt{c: c, outcome: o}
}

func TestPlannerTransitions(t *testing.T) {
	one := 1
	zero := 0
	primary := &route{cfg: engines.Config{Name: "p", Retries: &one}}
	fallback := &route{cfg: engines.Config{Name: "f", Retries: &zero}}
	ctxfb := &route{cfg: engines.Config{Name: "big", Retries: &zero}}
	primary.fallback, primary.contextFallback = fallback, ctxfb
	plan := buildPlan(primary)
	pol := policy{retryAfterMax: 5 * time.Second, hangupGrace: 10 * time.Second}
	clock := clock.NewFake()

	walk := func(t *testing.T, p *planner, outcomes ...outcome) []string {
		var steps []string
		c, ok := p.next()
		for _, o := range outcomes {
			if !ok {
				t.Fatalf("the plan ended early after %v", steps)
			}
			a := fakeAttempt(c, o)
			if o == outcomeStatus {
				a.resp = &http.Response{StatusCode: 503, Header: http.Header{}}
			}
			s := p.decide(a, judge(a.judgement(clock.Now()), pol))
			steps = append(steps, c.rt.cfg.Name+":"+s.String())
			if s == stepNext {
				c, ok = p.next()
			}
		}
		return steps
	}
	eq := func(t *testing.T, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("steps %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("steps %v, want %v", got, want)
			}
		}
	}

	t.Run("transient failure: retry, then the fallback", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		eq(t, walk(t, p, outcomeStatus, outcomeStatus, outcomeGood), "p:retry", "p:next", "f:commit")
	})
	t.Run("connect failure moves on at once", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		eq(t, walk(t, p, outcomeConnect, outcomeGood), "p:next", "f:commit")
	})
	t.Run("slow start, failed fallback: wait for the engine again, once", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		eq(t, walk(t, p, outcomeSlow, outcomeConnect, outcomeGood), "p:next", "f:next", "p:commit")
		if p.current().slow != nil {
			t.Fatal("the engine waited for again may leave for its fallback again")
		}
	})
	t.Run("client gone", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		eq(t, walk(t, p, outcomeCanceled), "p:abandon")
	})
	t.Run("all fail: stop after the last", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		eq(t, walk(t, p, outcomeConnect, outcomeConnect), "p:next", "f:next")
		if _, ok := p.next(); ok {
			t.Fatal("a candidate after the last")
		}
		if len(p.failed) != 2 || p.attempts != 2 {
			t.Fatalf("failed %d, attempts %d", len(p.failed), p.attempts)
		}
	})
	t.Run("context too long: the context fallback, once", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		c, _ := p.next()
		a := fakeAttempt(c, outcomeStatus)
		a.resp = &http.Response{StatusCode: 400, Header: http.Header{}}
		a.errBody = []byte(`{"error":{"code":"context_length_exceeded"}}`)
		if s := p.decide(a, judge(a.judgement(clock.Now()), pol)); s != stepNext {
			t.Fatalf("step %s", s)
		}
		if c, _ := p.next(); c.rt != ctxfb || c.role != roleContext {
			t.Fatalf("next is %s (%s)", c.rt.cfg.Name, c.role)
		}
		if len(plan) != 2 {
			t.Fatal("the route's shared plan was changed")
		}
	})
	t.Run("a plain 400 stops", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		c, _ := p.next()
		a := fakeAttempt(c, outcomeStatus)
		a.resp = &http.Response{StatusCode: 400, Header: http.Header{}}
		if s := p.decide(a, judge(a.judgement(clock.Now()), pol)); s != stepStop {
			t.Fatalf("step %s", s)
		}
	})
	t.Run("max_attempts ends the walk", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 2)
		eq(t, walk(t, p, outcomeStatus, outcomeStatus), "p:retry", "p:next")
		if c, ok := p.next(); ok {
			t.Fatalf("%s tried after max_attempts", c.rt.cfg.Name)
		}
	})
	t.Run("a spent pool budget skips the members left", func(t *testing.T) {
		m1 := candidate{rt: primary, role: rolePool}
		m2 := candidate{rt: fallback, role: rolePool}
		body := candidate{rt: ctxfb, role: roleBody}
		p := newPlanner([]candidate{m1, m2, body}, &failoverBudget{attempts: 1, deadline: clock.Now().Add(time.Minute)}, clock, 8)
		eq(t, walk(t, p, outcomeConnect, outcomeGood), "p:next", "big:commit")
	})
}
