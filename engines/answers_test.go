package engines

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// checkedCloud is cloud with a check of its own (GET /models) and
// credentials of its own (a signature header): a provider like
// Anthropic's, whose model list needs its anthropic-version.
type checkedCloud struct{ cloud }

func (checkedCloud) Check(u, base *url.URL) { u.Path = providers.JoinPath(base.Path, "/models") }

func (checkedCloud) Authorize(_ context.Context, r *http.Request, _ []byte) error {
	r.Header.Set("X-Cloud-Signature", "signed")
	return nil
}

func (checkedCloud) Where() string { return "zone-1" }

// cloudEngine is a provider's engine at to, built as the caddy module
// builds one (its health checks started).
func cloudEngine(t *testing.T, p providers.Provider, to string, mutate func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Name: "cloud", Provider: p, To: to, Models: []string{"m"}, APIKey: "cloud-key"}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	e, err := New(cfg, tr, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Destruct()
		tr.CloseIdleConnections()
	})
	return e
}

// A provider's engine is no process and answers no GET /health: it is
// sent nothing but requests, and its state is its answers: ready before
// any and after a good one, failing after a failure, down while its
// host's breaker is open. A probe, the status page's or a slow start's,
// asks it nothing.
func TestAProvidersStateIsItsAnswers(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusNotFound) // no cloud answers /health
	}))
	defer srv.Close()
	e := cloudEngine(t, cloud{"z1"}, srv.URL, nil)
	e.StartHealthChecks()
	state := func() string { return e.Status().State }
	if s := e.Status(); s.State != "ready" || !s.Ready || s.Provider == nil || s.Provider.Name != "cloud" || s.Provider.LastAnswer != nil {
		t.Fatalf("before any answer: %+v %+v", s, s.Provider)
	}
	if !e.Probe(context.Background()) {
		t.Fatal("a probe of a provider's engine that failed nothing says unreachable")
	}
	e.Heard(false) // the fan-out's or an old page's look: not its words
	if state() != "ready" {
		t.Fatalf("after a look: %s", state())
	}

	at := time.Unix(1700000000, 0)
	e.Answered(Answer{At: at, Status: 503, Reason: "503", Failed: true})
	if s := e.Status(); s.State != "failing" || s.Ready || s.Provider.LastAnswer.Status != 503 || !s.Provider.LastAnswer.At.Equal(at) {
		t.Fatalf("after a 503: %+v %+v", s, s.Provider.LastAnswer)
	}
	if !e.Probe(context.Background()) {
		t.Fatal("a failing provider is reachable: a request may still go")
	}
	e.Answered(Answer{At: at, Status: 400, Reason: "400"}) // the request's own fault
	if state() != "ready" {
		t.Fatalf("after a 400: %s", state())
	}
	for range e.cfg.BreakerFailures {
		ok, _ := e.Breaker().Allow()
		if !ok {
			break
		}
		e.Breaker().Failure()
	}
	if state() != "down" || e.Probe(context.Background()) {
		t.Fatalf("its host's breaker open: %s", state())
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the provider was sent %d requests that were not requests", n)
	}
}

// A provider's engine with health checks is checked with its provider's
// own check, with the engine's key and the provider's credentials; one
// whose provider has none names a health_path.
func TestAProvidersHealthCheckIsItsOwn(t *testing.T) {
	var paths atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path + " " + r.Header.Get("X-Cloud-Key") + " " + r.Header.Get("X-Cloud-Signature"))
	}))
	defer srv.Close()
	e := cloudEngine(t, checkedCloud{cloud{"z1"}}, srv.URL, func(c *Config) { c.HealthInterval = caddy.Duration(10 * time.Second) })
	clk := clock.NewFake()
	e.SetClock(clk)
	e.StartHealthChecks()
	clk.WaitForTimers(1)
	if got, _ := paths.Load().(string); got != "/models cloud-key signed" {
		t.Fatalf("the check sent %q", got)
	}
	if s := e.Status(); s.State != "ready" || s.Health != "up" || s.Provider.Where != "zone-1" {
		t.Fatalf("%+v %+v", s, s.Provider)
	}

	cfg := Config{Name: "cloud", Provider: cloud{"z1"}, Models: []string{"m"}, HealthInterval: caddy.Duration(time.Second)}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "no check of its own") {
		t.Fatalf("health_interval without a check: %v", err)
	}
	cfg.HealthPath = "/v1/status"
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatalf("with a health_path: %v", err)
	}
}

// An engine without a provider keeps no answers: its state is its
// process's or its probes'.
func TestAnEngineWithoutAProviderKeepsNoAnswers(t *testing.T) {
	e := cloudEngine(t, nil, "http://127.0.0.1:1", nil)
	e.Answered(Answer{Status: 503, Failed: true})
	if s := e.Status(); s.Provider != nil || e.answer.Load() != nil {
		t.Fatalf("%+v", s)
	}
}
