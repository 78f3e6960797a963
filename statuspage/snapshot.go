package statuspage

import (
	"context"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Source is the running gateway as the page sees it; the caddy module
// implements it over the live configs and the admin API's operations.
type Source interface {
	// Engines are the live engines, sorted by name.
	Engines() []*engines.Engine
	// Pools are the live pools with their members' breakers.
	Pools() []handler.PoolStatus
	// Act runs the admin API's "start" or "stop" (drain: let requests in
	// flight finish) on the named engine.
	Act(ctx context.Context, engine, action string, drain bool) error
	// KeyUsage is every named key with limits, each limit's usage in its
	// current window, by the key's name: never its token.
	KeyUsage() []quota.KeyUsage
	// ResetKey runs the admin API's reset of the named key's counters.
	ResetKey(name string) error
}

// snapshot is what the page shows of engines, pools and keys. Times that count
// down are sent as moments (Unix ms), so an unchanged snapshot is the same
// bytes and is not sent again, while the page counts down on its own.
type snapshot struct {
	Engines []engineView `json:"engines"`
	Pools   []poolView   `json:"pools"`
	Keys    []keyView    `json:"keys"`
	// Issuing: keys may be issued here (issued.go)
	Issuing bool      `json:"issuing,omitempty"`
	Memory  []boxView `json:"memory,omitempty"` // the scheduler (memory.go)
}

type engineView struct {
	Name    string   `json:"name"`
	Models  []string `json:"models"`
	Managed bool     `json:"managed"`
	// State is stopped, waiting (a start waiting for room), starting, ready, stopping, sleeping (swap sleep),
	// failed (stopped after a failed start) or, for a remote engine, the engine's own: ready, down
	// (failing its health checks, its breaker open, or not answering its
	// probe) or unknown (nobody heard from it yet); for a cloud provider's,
	// ready, failing or down by its answers (Provider).
	State          string `json:"state"`
	PID            int    `json:"pid,omitempty"`
	Port           int    `json:"port,omitempty"`
	Leases         int    `json:"leases"`
	Group          string `json:"group,omitempty"`
	Fallback       string `json:"fallback,omitempty"`
	Breaker        string `json:"breaker"`                    // the host's breaker (transport failures)
	BreakerRetryAt int64  `json:"breaker_retry_at,omitempty"` // when an open breaker lets a trial through
	// ModelBreakers are the per-model breakers that are not closed (status
	// failures and answer timeouts of one model), by the model sent.
	ModelBreakers    map[string]string `json:"model_breakers,omitempty"`
	LastError        string            `json:"last_error,omitempty"`
	StartMs          int64             `json:"start_ms,omitempty"`       // the last start's duration
	StartedAt        int64             `json:"started_at,omitempty"`     // when it became ready last
	StartingSince    int64             `json:"starting_since,omitempty"` // while starting: since when
	IdleTimeoutSecs  int64             `json:"idle_timeout_s,omitempty"`
	IdleStopAt       int64             `json:"idle_stop_at,omitempty"` // when the idle stop is due, while idle
	SleepAt          int64             `json:"sleep_at,omitempty"`     // swap sleep: when sleep_after is due, while idle (sleep.go)
	RemoteReachable  *bool             `json:"reachable,omitempty"`    // a remote engine's last probe
	RemoteProbedAtMs int64             `json:"probed_at,omitempty"`
	// Limit is the engine's max_concurrent and queue with their use now
	//; absent without max_concurrent.
	Limit *engines.LimitStatus `json:"limit,omitempty"`
	// About is its models' name, description and metadata for people
	// (display_name, description, metadata), as /v1/models lists them.
	About *engines.About `json:"about,omitempty"`
	// Provider is a cloud provider's engine's provider, where its requests
	// go (a region, a project) and its last answer; such an engine is no
	// process (no pid, no start or stop) and is never probed.
	Provider *engines.ProviderStatus `json:"provider,omitempty"`
}

type poolView struct {
	Name string `json:"name"`
	// Members in the order a request without a session key tries them:
	// healthy members whose engine is ready, then starting, then stopped;
	// members with an open breaker last (skipped until their cool-down ends).
	// Ready members take turns, so their order rotates.
	Members []memberView `json:"members"`
}

type memberView struct {
	Member      string `json:"member"`
	Engine      string `json:"engine"`
	Model       string `json:"model"`
	Breaker     string `json:"breaker"`
	EngineState string `json:"engine_state"`
	Skipped     bool   `json:"skipped,omitempty"`
}

// keyView is a named key with limits, by its configured name:
// the page is never sent a token.
type keyView struct {
	Name   string      `json:"name"`
	Source string      `json:"source,omitempty"` // issued, identity; a key of the config says none
	Limits []limitView `json:"limits"`
	// Issued is an issued key's life (issued.go)
	Issued *issuedView `json:"issued,omitempty"`
}

// limitView is one limit of a key in its current window.
type limitView struct {
	Kind      quota.Kind `json:"kind"`  // requests, tokens or spend
	Limit     string     `json:"limit"` // as configured: "60/m", spend's "1/d"
	Max       int64      `json:"max"`   // the limit's count per window (spend: nano-dollars)
	Used      int64      `json:"used"`
	Reserved  int64      `json:"reserved,omitempty"` // tokens reserved by requests in flight
	Remaining int64      `json:"remaining"`
	ResetAt   int64      `json:"reset_at"` // when the window ends, Unix ms (a whole second)
}

func keyViews(usage []quota.KeyUsage) []keyView {
	out := make([]keyView, 0, len(usage))
	for _, u := range usage {
		kv := keyView{Name: u.Key, Limits: make([]limitView, 0, len(u.Limits))}
		for _, l := range u.Limits {
			kv.Limits = append(kv.Limits, limitView{
				Kind: l.Kind, Limit: l.Spec(), Max: l.Limit.N,
				Used: l.Used, Reserved: l.Reserved, Remaining: l.Remaining,
				ResetAt: l.Reset.UnixMilli(),
			})
		}
		out = append(out, kv)
	}
	return out
}

// remoteProbeEvery bounds how often the page probes remote engines,
// however many pages are open.
const remoteProbeEvery = 5 * time.Second

// reachability caches remote engines' probes.
type reachability struct {
	mu      sync.Mutex
	probing bool
	at      time.Time
	up      map[string]bool
}

// refresh probes every remote engine when the last round is older than
// remoteProbeEvery; one caller probes while the others use the cache.
func (c *reachability) refresh(ctx context.Context, clk clock.Clock, es []*engines.Engine) {
	c.mu.Lock()
	if c.probing || clk.Now().Sub(c.at) < remoteProbeEvery {
		c.mu.Unlock()
		return
	}
	c.probing = true
	c.mu.Unlock()
	up := map[string]bool{}
	for _, e := range es {
		if cfg := e.Config(); !cfg.Managed() && !cfg.IsProvider() { // a provider's state is its answers
			up[e.Name()] = e.Probe(ctx)
			e.Heard(up[e.Name()]) // the engine's state says it, on every surface
		}
	}
	c.mu.Lock()
	c.probing, c.at, c.up = false, clk.Now(), up
	c.mu.Unlock()
}

func (c *reachability) get(name string) (bool, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	up, ok := c.up[name]
	return up, c.at, ok
}

// takeSnapshot reads every engine, pool and key now.
func (s *Server) takeSnapshot(ctx context.Context) snapshot {
	es := s.Source.Engines()
	s.reach.refresh(ctx, s.clock(), es)
	now := s.clock().Now()
	snap := snapshot{Engines: make([]engineView, 0, len(es)), Pools: []poolView{}}
	snap.Keys, snap.Issuing = s.keys() // issued.go
	shown := map[string]string{}       // as the page shows it
	actual := map[string]string{}      // as the handler's pool sees it
	for _, e := range es {
		v := s.engineView(e, now)
		shown[v.Name], actual[v.Name] = v.State, e.State().String()
		snap.Engines = append(snap.Engines, v)
	}
	for _, p := range s.Source.Pools() {
		snap.Pools = append(snap.Pools, poolInTryOrder(p, actual, shown))
	}
	snap.Memory = memoryViews()
	return snap
}

func (s *Server) engineView(e *engines.Engine, now time.Time) engineView {
	st := e.Status()
	cfg := e.Config()
	v := engineView{
		Name: st.Name, Models: st.Models, Managed: st.Managed, State: st.State,
		PID: st.PID, Port: st.Port, Leases: st.Leases, Group: st.Group, Fallback: cfg.Fallback,
		Breaker: st.EngineBreaker, ModelBreakers: st.ModelBreakers, LastError: engines.Mask(st.LastError, nil),
		IdleTimeoutSecs: int64(time.Duration(cfg.IdleTimeout) / time.Second),
		Limit:           st.Limit,
		About:           cfg.About,
		Provider:        st.Provider,
	}
	switch {
	case st.State == "starting" && e.WaitingForRoom():
		v.State = "waiting" // for its turn: no process runs yet
	case st.State == "draining":
		v.State = "stopping"
	case st.State == "stopped" && st.LastError != "":
		v.State = "failed"
	}
	if in := e.Breaker().RetryIn(); in > 0 {
		v.BreakerRetryAt = roundMs(now.Add(in))
	}
	if !st.StartingSince.IsZero() {
		v.StartingSince = st.StartingSince.UnixMilli()
	}
	if start, ok := s.Board.LastStart(st.Name); ok {
		v.StartMs, v.StartedAt = start.Duration.Milliseconds(), start.At.UnixMilli()
	}
	if st.Managed && st.State == "ready" && st.Leases == 0 && cfg.IdleTimeout > 0 && st.IdleSecs > 0 {
		left := time.Duration(cfg.IdleTimeout) - time.Duration(st.IdleSecs*float64(time.Second))
		v.IdleStopAt = roundMs(now.Add(max(left, 0)))
	}
	sleepView(&v, st, cfg, now) // swap sleep (sleep.go)
	if !st.Managed {
		if up, at, ok := s.reach.get(st.Name); ok {
			v.RemoteReachable, v.RemoteProbedAtMs = &up, at.UnixMilli()
		}
	}
	return v
}

// roundMs is t in Unix milliseconds, rounded to a quarter second so that a
// moment computed twice is the same number and an unchanged snapshot stays
// the same bytes.
func roundMs(t time.Time) int64 {
	return t.Round(250 * time.Millisecond).UnixMilli()
}

// poolInTryOrder orders a pool's members as the handler's pool does for a
// request without a session key (see handler's pool.order): by the engines'
// actual states (a remote engine is always ready to the pool, reachable or
// not), each shown with the state the page shows.
func poolInTryOrder(p handler.PoolStatus, actual, shown map[string]string) poolView {
	rank := func(m handler.MemberStatus) int {
		if m.Breaker != "closed" {
			return 3
		}
		switch actual[m.Engine] {
		case "ready":
			return 0
		case "starting":
			return 1
		}
		return 2
	}
	pv := poolView{Name: p.Name, Members: make([]memberView, 0, len(p.Members))}
	for r := 0; r <= 3; r++ {
		for _, m := range p.Members {
			if rank(m) == r {
				pv.Members = append(pv.Members, memberView{
					Member: m.Member, Engine: m.Engine, Model: m.Model, Breaker: m.Breaker,
					EngineState: shown[m.Engine], Skipped: r == 3,
				})
			}
		}
	}
	return pv
}
