package engines

import (
	"net/url"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// A cloud provider's engine is no process, and no cloud answers GET
// /health: the page showed such engines down and not reachable beside a 200
// they had just served, and the admin API unknown until a first answer
// (issue 53). What the gateway knows of a provider's engine is what it
// answered. Its state comes from its answers:
//
//	state     when
//	ready     no answer yet, or its last answer was good (or the request's own fault: a 400)
//	failing   its last answer was a failure: a 5xx, a 429, credentials refused, no answer at all
//	down      its host's breaker keeps requests away (it could not be reached), or its health checks failed
//
// Health checks (health_interval) are the provider's own cheap check when it
// has one (a model list, with the engine's credentials), else the
// health_path the engine names; without them nothing is sent but requests.

// Answer is how an attempt on a provider's engine ended.
type Answer struct {
	At time.Time `json:"at"`
	// Status is the HTTP status it answered; 0 when it did not answer.
	Status int `json:"status,omitempty"`
	// Reason is the verdict's: ok, 429, connect, timeout, credentials, …
	Reason string `json:"reason"`
	// Failed is whether the answer counts against the engine: anything
	// but a good answer or one that faults the request (400, 422).
	Failed bool `json:"failed"`
}

// ProviderStatus is what the admin API and the status page show of a
// provider's engine beside its models.
type ProviderStatus struct {
	Name string `json:"name"`
	// Where is where its requests go beyond `to`, in the provider's words:
	// a region, a project and location; absent when `to` says it all.
	Where string `json:"where,omitempty"`
	// LastAnswer is its last attempt's end; absent before any.
	LastAnswer *Answer `json:"last_answer,omitempty"`
}

// Answered records how an attempt on a provider's engine ended; it does
// nothing for another engine, whose state is its process's or its probes'.
func (e *Engine) Answered(a Answer) {
	if !e.cfg.IsProvider() {
		return
	}
	if prev := e.answer.Swap(&a); prev == nil || prev.Failed != a.Failed {
		e.mu.Lock()
		e.broadcast() // its state changed
		e.mu.Unlock()
	}
}

// answersState is a provider's engine's state from its answers, once its
// breaker and health checks have had their say (remoteState).
func (e *Engine) answersState() string {
	if a := e.answer.Load(); a != nil && a.Failed {
		return "failing"
	}
	return "ready"
}

// providerStatus is the engine's provider's part of its Status; nil for an
// engine without one.
func (e *Engine) providerStatus() *ProviderStatus {
	p := e.cfg.Provider
	if p == nil {
		return nil
	}
	ps := &ProviderStatus{Name: p.Name(), LastAnswer: e.answer.Load()}
	if l, ok := p.(providers.Locator); ok {
		ps.Where = l.Where()
	}
	return ps
}

// checkURL is the URL of the engine's health check: its provider's own
// check, unless the engine names a health_path.
func (e *Engine) checkURL() *url.URL {
	if c, ok := e.cfg.Provider.(providers.Checker); ok && e.cfg.HealthPath == "" {
		u := *e.base
		c.Check(&u, e.base)
		return &u
	}
	u := e.base.JoinPath(e.cfg.HealthPath)
	u.RawQuery = ""
	return u
}
