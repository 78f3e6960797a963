package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// A pool's members from Caddy's own upstream sources (`dynamic srv`,
// `dynamic a`, `dynamic multi`), loaded as guest modules the way
// reverse_proxy loads its dynamic upstreams. Each pool with a source has a
// follower: a goroutine that asks the source for its upstreams and hands
// the addresses to the pool (handler/dynamic.go), off the request path.
// The sources cache their answers and look them up again on their own
// refresh interval; the follower asks them a few times per interval, so a
// pool follows a changed answer within about one interval (and at most a
// second after the source itself saw it).

// followers are a config's followers; Cleanup stops them.
type followers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// followSources loads every dynamic pool's source and starts its follower.
// Like engines' health checks, the followers run from Provision (a source
// is only asked, nothing is started) until Cleanup.
func (g *Gateway) followSources(ctx caddy.Context, cfg hconfig.Config) error {
	if len(g.gw.DynamicPools()) == 0 {
		return nil
	}
	g.gw.SetMemberMaker(&memberMaker{ctx: ctx, keys: map[*engines.Engine]string{}})
	fctx, cancel := context.WithCancel(context.Background())
	f := &followers{cancel: cancel}
	g.followers = f
	for _, pc := range cfg.Pools {
		if !pc.IsDynamic() {
			continue
		}
		mod, err := ctx.LoadModule(&pc, "Dynamic")
		if err != nil {
			return fmt.Errorf("pool %s: loading its source of members: %v", pc.Name, err)
		}
		src, ok := mod.(reverseproxy.UpstreamSource)
		if !ok {
			return fmt.Errorf("pool %s: module %T is not a source of upstreams", pc.Name, mod)
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			follow(fctx, g.gw, pc.Name, src, pollEvery(src), g.logger)
		}()
	}
	return nil
}

// stop ends the followers and waits for them.
func (f *followers) stop() {
	if f == nil {
		return
	}
	f.cancel()
	f.wg.Wait()
}

// pollEvery is how often a follower asks its source: a fifth of the
// source's refresh interval (Caddy's srv and a sources default to 1m), at
// most a second, at least 50ms. Asking between refreshes costs a map
// lookup: the source answers from its cache.
func pollEvery(src reverseproxy.UpstreamSource) time.Duration {
	refresh := time.Second * 5
	switch s := src.(type) {
	case *reverseproxy.SRVUpstreams:
		refresh = time.Duration(s.Refresh)
	case *reverseproxy.AUpstreams:
		refresh = time.Duration(s.Refresh)
	}
	return min(max(refresh/5, 50*time.Millisecond), time.Second)
}

// resolveTimeout bounds one ask of a source (a DNS lookup that hangs).
const resolveTimeout = 10 * time.Second

// follow hands the source's answers to the pool until ctx ends. A source
// that fails leaves the members as they were: a DNS outage must not empty
// a pool. Its failure is logged once, and its recovery.
func follow(ctx context.Context, gw *handler.Gateway, pool string, src reverseproxy.UpstreamSource, every time.Duration, log *zap.Logger) {
	var failing string
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		addrs, err := resolve(ctx, src)
		switch {
		case err != nil && err.Error() != failing:
			failing = err.Error()
			log.Warn("a pool's source of members failed; its members stay as they were",
				zap.String("pool", pool), zap.Error(err))
		case err == nil:
			if failing != "" {
				log.Info("a pool's source of members answers again", zap.String("pool", pool))
				failing = ""
			}
			gw.SetMembers(ctx, pool, addrs)
		}
		t.Reset(every)
	}
}

// resolve asks src for its upstreams as reverse_proxy does: with a request
// that carries a replacer (a source may hold placeholders), here one of
// no client's.
func resolve(ctx context.Context, src reverseproxy.UpstreamSource) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	ups, err := src.GetUpstreams(r)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, 0, len(ups))
	for _, u := range ups {
		addrs = append(addrs, u.Dial)
	}
	return addrs, nil
}

// memberMaker makes a found member's engine as a written engine's (the
// usage pool: one runtime per definition across reloads, its transport,
// its health checks), and lists it on the admin API and the status page
// while the pool has it.
type memberMaker struct {
	ctx  caddy.Context
	mu   sync.Mutex
	keys map[*engines.Engine]string // each member's usage-pool key
}

func (m *memberMaker) MakeMember(ec engines.Config) (*engines.Engine, error) {
	e, key, err := loadEngine(m.ctx, ec)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.keys[e] = key
	m.mu.Unlock()
	registerForAdmin([]*engines.Engine{e})
	return e, nil
}

func (m *memberMaker) ReleaseMember(e *engines.Engine) {
	unregisterForAdmin([]*engines.Engine{e})
	m.mu.Lock()
	key, ok := m.keys[e]
	delete(m.keys, e)
	m.mu.Unlock()
	if ok {
		_, _ = enginePool.Delete(key)
	}
}

// Interface guards
var _ handler.MemberMaker = (*memberMaker)(nil)
