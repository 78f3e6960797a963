package caddymodule

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/keystore"
)

// Keys issued at run time (issued_keys): the config's handle on their
// store (the keystore package: the embedded file of the counters, or the
// counters' Redis), handed to the gateway's door; the live handles, for
// the admin API and the status page, which issue, update, rotate and
// revoke through the newest; and each answer's tokens counted in the key's
// use.

// secretPath is where a generated secret lives: a file of its own beside
// the store's, so that a copy of the store does not carry it.
func secretPath() string {
	return filepath.Join(caddy.AppDataDir(), "llm_gateway", "keys.secret")
}

// openIssued opens the issued keys' store of a config with issued_keys.
func openIssued(cfg hconfig.Config, repl *caddy.Replacer, log *zap.Logger) (*keystore.Store, error) {
	ik := cfg.IssuedKeys
	secret := repl.ReplaceKnown(ik.Secret, "")
	if ik.Secret != "" && secret == "" {
		// an unset variable must not quietly become a generated secret
		return nil, fmt.Errorf("issued_keys: the secret resolves to nothing: set %v in Caddy's environment", ik.Secret)
	}
	if secret != "" && len(secret) < hconfig.MinSecretLength {
		return nil, fmt.Errorf("issued_keys: the secret is %d characters long; use at least %d (openssl rand -hex 32)", len(secret), hconfig.MinSecretLength)
	}
	kc := keystore.Config{
		Path: quotaPath(), SecretPath: secretPath(), Secret: secret, Max: ik.MaxIssued(),
		OnError: func(err error) {
			if err != nil {
				log.Error("the issued keys' store is failing: keys issued elsewhere meanwhile are not seen here, and none can be issued", zap.Error(err))
				return
			}
			log.Info("the issued keys' store answers again")
		},
	}
	if st := cfg.Store; st != nil {
		prefix := st.Prefix
		if prefix == "" {
			prefix = "llm_gateway" // the counters' default is llm_gateway:quota
		}
		kc.Redis = &keystore.RedisConfig{
			Addr:     repl.ReplaceKnown(st.Redis, ""),
			Password: repl.ReplaceKnown(st.Password, ""),
			DB:       st.DB,
			Prefix:   prefix + ":keys",
			Timeout:  max(10*time.Duration(st.Timeout), time.Second),
		}
	}
	s, err := keystore.Open(kc)
	if err != nil {
		return nil, fmt.Errorf("opening the issued keys' store: %v", err)
	}
	return s, nil
}

// issuedDoor is what a config's door sees of the issued keys: every one,
// but a key with the name of one of the config's own, which the config's
// key wins (names are unique across both: the admin API refuses such a
// name, and a config that brings one says so when it loads).
type issuedDoor struct {
	*keystore.Store
	shadowed map[string]bool
}

func (d issuedDoor) Find(token string) (*keys.Rules, error) {
	kr, err := d.Store.Find(token)
	if kr != nil && d.shadowed[kr.Name] {
		return nil, nil
	}
	return kr, err
}

func (d issuedDoor) All() []*keys.Rules {
	all := d.Store.All()
	if len(d.shadowed) == 0 {
		return all
	}
	return slices.DeleteFunc(slices.Clone(all), func(kr *keys.Rules) bool { return d.shadowed[kr.Name] })
}

// giveIssued hands the store to the config's gateway, leaving out (and
// saying so) the issued keys the config's own keys shadow.
func giveIssued(gw *handler.Gateway, s *keystore.Store, log *zap.Logger) {
	door := issuedDoor{Store: s, shadowed: map[string]bool{}}
	for _, name := range gw.KeyNames() {
		if _, ok := s.Get(name); ok {
			door.shadowed[name] = true
			log.Error("an issued key has the name of a key of the config: it is refused while the config has that key (revoke it, or rename the config's key)", zap.String("key", name))
		}
	}
	gw.SetIssued(door)
}

// liveIssued are the live configs' issued keys, the newest last: the admin
// API and the status page act on the newest's store, with its logger.
var liveIssued struct {
	sync.Mutex
	list []issuedHandle
}

type issuedHandle struct {
	store *keystore.Store
	log   *zap.Logger
}

func registerIssued(s *keystore.Store, log *zap.Logger) {
	liveIssued.Lock()
	defer liveIssued.Unlock()
	liveIssued.list = append(liveIssued.list, issuedHandle{s, log.Named("keys")})
}

func unregisterIssued(s *keystore.Store) {
	liveIssued.Lock()
	defer liveIssued.Unlock()
	liveIssued.list = slices.DeleteFunc(liveIssued.list, func(h issuedHandle) bool { return h.store == s })
}

// newestIssued is the newest live config's issued keys; ok is false when
// no live config takes issued keys.
func newestIssued() (issuedHandle, bool) {
	liveIssued.Lock()
	defer liveIssued.Unlock()
	if n := len(liveIssued.list); n > 0 {
		return liveIssued.list[n-1], true
	}
	return issuedHandle{}, false
}

// chargeIssued counts an answer's tokens in its issued key's use (what
// the key's budget was charged: the answer's usage and a hedge's loser).
func (g *Gateway) chargeIssued(res *handler.Result) {
	if g.issued != nil && res.KeyName != "" && res.HasUsage {
		g.issued.Charge(res.KeyName, int64(res.Usage.Total()+res.HedgeUsage.Total()))
	}
}
