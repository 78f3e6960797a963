package keys

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Identity is who another Caddy handler authenticated (basic_auth,
// forward_auth, a JWT module), as the caddy module read it from the
// config's placeholders: the door's "who" when the request carries one.
type Identity struct {
	User   string
	Groups []string
}

// Limits of what an identity may be: its name is a metric label, a log
// field and a history column.
const (
	maxIdentity = 256
	maxGroups   = 64
)

type identityKey struct{}

// WithIdentity is r carrying the identity another handler authenticated;
// an empty user is none.
func WithIdentity(r *http.Request, id Identity) *http.Request {
	if id.User == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
}

func identityOf(r *http.Request) (Identity, bool) {
	id, ok := r.Context().Value(identityKey{}).(Identity)
	return id, ok
}

// Identities are the rule blocks of Caddy's identities at runtime: one per
// user, per group (in order), and a default.
type Identities struct {
	users  map[string]*Rules
	groups []groupRules
	def    *Rules
	seen   seenIdentities
}

type groupRules struct {
	name  string
	rules *Rules
}

// NewIdentities are the rule blocks of cfg; nil for none.
func NewIdentities(cfg *config.Identity) *Identities {
	if cfg == nil {
		return nil
	}
	ids := &Identities{users: map[string]*Rules{}}
	for _, u := range cfg.Users {
		ids.users[u.Name] = NewRules(u)
	}
	for _, g := range cfg.GroupRules {
		ids.groups = append(ids.groups, groupRules{g.Name, NewRules(g)})
	}
	if cfg.Default != nil {
		ids.def = NewRules(*cfg.Default)
	}
	return ids
}

// rules are an identity's: its user block's, else its first group's, else
// the default's, under its own name (config.IdentityPrefix and its id), so
// every identity has counters, history and metrics of its own.
func (ids *Identities) rules(id Identity) (*Rules, *apierror.Error) {
	if err := usable(id); err != nil {
		return nil, err
	}
	block := ids.users[id.User]
	for _, g := range ids.groups {
		if block != nil {
			break
		}
		for _, name := range id.Groups {
			if name == g.name {
				block = g.rules
				break
			}
		}
	}
	if block == nil {
		block = ids.def
	}
	if block == nil {
		return nil, notAllowed(fmt.Sprintf("user %s has no rules here: no user block names it, it is in no group a group block names, and there is no default block", id.User))
	}
	kr := *block // the block's rules, shared; the name the identity's own
	kr.Name = config.IdentityPrefix + id.User
	if !kr.Limits.Empty() {
		ids.seen.add(&kr)
	}
	return &kr, nil
}

// usable refuses an identity that cannot be a name: too long, not text.
func usable(id Identity) *apierror.Error {
	if len(id.User) > maxIdentity || len(id.Groups) > maxGroups {
		return notAllowed(fmt.Sprintf("the authenticated identity is over %d bytes or in over %d groups", maxIdentity, maxGroups))
	}
	if !utf8.ValidString(id.User) || strings.ContainsFunc(id.User, unicode.IsControl) {
		return notAllowed("the authenticated identity is not text")
	}
	return nil
}

func notAllowed(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "identity_not_allowed", Message: msg}
}

// SplitGroups reads a groups placeholder's value: names separated by
// commas (a JWT claim's array as Caddy's JWT modules write it, an SSO
// proxy's Remote-Groups header), spaces around them dropped.
func SplitGroups(v string) []string {
	var out []string
	for _, g := range strings.Split(v, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// Seen are the rules of the identities with limits that asked since the
// config loaded (at most maxSeen), for the admin API's and the page's
// counters.
func (ids *Identities) Seen() []*Rules {
	if ids == nil {
		return nil
	}
	return ids.seen.list()
}

// maxSeen bounds the identities the admin API lists: their counters are
// kept all the same.
const maxSeen = 10000

type seenIdentities struct {
	m sync.Map // name → *Rules
	n atomic.Int64
}

func (s *seenIdentities) add(kr *Rules) {
	if s.n.Load() >= maxSeen {
		return
	}
	if _, loaded := s.m.LoadOrStore(kr.Name, kr); !loaded {
		s.n.Add(1)
	}
}

func (s *seenIdentities) list() []*Rules {
	var out []*Rules
	s.m.Range(func(_, v any) bool {
		out = append(out, v.(*Rules))
		return true
	})
	return out
}
