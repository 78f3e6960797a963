package handler

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestMaxAttemptsBoundsEveryKindOfAttempt(t *testing.T) {
	up, hits := failing(t)
	three := 3
	cfg := fiveEngines(up.URL)
	cfg.MaxAttempts = 5
	cfg.Engines[0].Retries = &three
	cfg.Engines[0].RetryAfterMax = 0
	_, url := testGateway(t, cfg, nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","b","c","d"]}`)
	if resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body[:200])
	}
	if n := hits.Load(); n != 5 {
		t.Fatalf("%d upstream calls, want max_attempts 5", n)
	}
	if h := resp.Header.Get("X-LLM-Attempts"); strings.Count(h, "=") != 5 {
		t.Fatalf("X-LLM-Attempts %q", h)
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
			s := p.decide(a, judge(a.judgement(), pol))
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
		a := fakeAttempt(c, outcomeRequestFault)
		a.resp = &http.Response{StatusCode: 400, Header: http.Header{}}
		a.fault = recogniseFault(400, []byte(`{"error":{"code":"context_length_exceeded"}}`), nil)
		if s := p.decide(a, judge(a.judgement(), pol)); s != stepNext {
			t.Fatalf("step %s", s)
		}
		if c, _ := p.next(); c.rt != ctxfb || c.role != roleContext {
			t.Fatalf("next is %s (%s)", c.rt.cfg.Name, c.role)
		}
		if len(plan) != 2 {
			t.Fatal("the route's shared plan was changed")
		}
	})
	t.Run("any other request fault stops", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		c, _ := p.next()
		a := fakeAttempt(c, outcomeRequestFault)
		a.resp = &http.Response{StatusCode: 500, Header: http.Header{}}
		a.fault = recogniseFault(500, []byte(`{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`), nil)
		if s := p.decide(a, judge(a.judgement(), pol)); s != stepStop {
			t.Fatalf("step %s", s)
		}
	})
	t.Run("a plain 400 stops", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		c, _ := p.next()
		a := fakeAttempt(c, outcomeStatus)
		a.resp = &http.Response{StatusCode: 400, Header: http.Header{}}
		if s := p.decide(a, judge(a.judgement(), pol)); s != stepStop {
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
	t.Run("a hedged candidate's transient failure: retried beside the next one", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		p.beside = func(c candidate) bool { return c.rt == primary }
		c, _ := p.next()
		a := fakeAttempt(c, outcomeStatus)
		a.resp = &http.Response{StatusCode: 500, Header: http.Header{}}
		if s := p.decide(a, judge(a.judgement(), pol)); s != stepRetryBeside || p.retries != 1 {
			t.Fatalf("step %s, retries %d", s, p.retries)
		}
	})
	t.Run("a hedged candidate with its retries spent moves on", func(t *testing.T) {
		p := newPlanner(plan, nil, clock, 8)
		p.beside = func(c candidate) bool { return c.rt == primary }
		p.next()
		p.retries = 1
		a := fakeAttempt(p.current(), outcomeStatus)
		a.resp = &http.Response{StatusCode: 500, Header: http.Header{}}
		if s := p.decide(a, judge(a.judgement(), pol)); s != stepNext {
			t.Fatalf("step %s", s)
		}
	})
	t.Run("a hedged candidate with nothing after it retries alone", func(t *testing.T) {
		p := newPlanner(plan[:1], nil, clock, 8)
		p.beside = func(candidate) bool { return true }
		eq(t, walk(t, p, outcomeStatus), "p:retry")
	})
	t.Run("a spent pool budget skips the members left", func(t *testing.T) {
		m1 := candidate{rt: primary, role: rolePool}
		m2 := candidate{rt: fallback, role: rolePool}
		body := candidate{rt: ctxfb, role: roleBody}
		p := newPlanner([]candidate{m1, m2, body}, &failover{attempts: 1, deadline: clock.Now().Add(time.Minute)}, clock, 8)
		eq(t, walk(t, p, outcomeConnect, outcomeGood), "p:next", "big:commit")
	})
}
