package config

import (
	"fmt"
	"strings"
)

// Identity applies rules to who another Caddy handler authenticated:
// `basic_auth`, `forward_auth` to an SSO proxy, a JWT module. Caddy's
// placeholders name the identity and its groups; the caddy module resolves
// them for each request and hands the result to the door, which gives the
// identity the rules of its user block, else of its first group's, else
// the default block's. Each identity is counted, limited, logged and traced
// under its own name, "user:<id>", as a key under its name.
type Identity struct {
	// User is the placeholder that names who is asking, such as
	// {http.auth.user.id} (basic_auth, a JWT module) or
	// {http.request.header.Remote-User} (a header forward_auth copies from
	// the SSO proxy's answer, after removing the client's). Empty: the
	// request is not authenticated, and needs a gateway key. Required.
	User string `json:"user"`

	// Groups is a placeholder whose value lists the identity's groups,
	// separated by commas: a JWT claim ({http.auth.user.groups}), a header
	// the SSO proxy sets ({http.request.header.Remote-Groups}). Default:
	// none.
	Groups string `json:"groups,omitempty"`

	// Users are rule blocks of single identities; a block's Name is the
	// identity. Default: none.
	Users []Key `json:"users,omitempty"`

	// GroupRules are rule blocks of groups, in order: an identity without a
	// block of its own gets the first whose group it is in; a block's Name
	// is the group. Default: none.
	GroupRules []Key `json:"group_rules,omitempty"`

	// Default is the rule block of every other authenticated identity.
	// Default: none, and such an identity is refused (403
	// identity_not_allowed).
	Default *Key `json:"default,omitempty"`
}

// IdentityPrefix starts the name an identity is counted, logged and
// traced under ("user:alice"): no key may have such a name.
const IdentityPrefix = "user:"

// validateIdentity checks the identity block: a placeholder for the user,
// named blocks once each, and rules as a key's, never an operator's.
func (c Config) validateIdentity(models map[string]string) error {
	id := c.Identity
	if id == nil {
		return nil
	}
	if !isPlaceholder(id.User) {
		return fmt.Errorf("identity takes a placeholder that names who is asking, such as {http.auth.user.id}, not %q", cut(id.User, 80))
	}
	if id.Groups != "" && !isPlaceholder(id.Groups) {
		return fmt.Errorf("identity groups takes a placeholder that lists the groups, such as {http.auth.user.groups}, not %q", cut(id.Groups, 80))
	}
	for _, set := range []struct {
		what   string
		blocks []Key
	}{{"user", id.Users}, {"group", id.GroupRules}} {
		seen := map[string]bool{}
		for _, b := range set.blocks {
			if b.Name == "" {
				return fmt.Errorf("identity: a %s block needs a name", set.what)
			}
			if seen[b.Name] {
				return fmt.Errorf("identity: %s %s is given twice", set.what, b.Name)
			}
			seen[b.Name] = true
			if err := c.checkIdentityRules(set.what+" "+b.Name, b, models); err != nil {
				return err
			}
		}
	}
	if id.Default != nil {
		return c.checkIdentityRules("default", *id.Default, models)
	}
	return nil
}

func (c Config) checkIdentityRules(what string, k Key, models map[string]string) error {
	switch {
	case k.Value != "":
		return fmt.Errorf("identity %s: a rule block has no token", what)
	case k.Operator:
		return fmt.Errorf("identity %s: an identity is never an operator (give the operator a key of its own)", what)
	}
	return CheckRules(k, "identity "+what, c.knows(models))
}

// isPlaceholder reports whether s is one Caddy placeholder, {…}.
func isPlaceholder(s string) bool {
	return len(s) > 2 && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && strings.Count(s, "{") == 1
}

// checkIdentityNames refuses a key named like an identity: both would
// share counters and history.
func checkIdentityNames(keys []Key) error {
	for _, k := range keys {
		if strings.HasPrefix(k.Name, IdentityPrefix) {
			return &ConfigError{Key: k.Name, Err: fmt.Errorf("key %s: a name starting with %s is an identity's (identity); give the key another", k.Name, IdentityPrefix)}
		}
	}
	return nil
}

// hasLimits reports whether a rule block has limits (or a team's).
func (id *Identity) hasLimits() bool {
	for _, b := range id.blocks() {
		if b.limited() {
			return true
		}
	}
	return false
}

// blocks are the identity's rule blocks.
func (id *Identity) blocks() []Key {
	if id == nil {
		return nil
	}
	blocks := append(append([]Key(nil), id.Users...), id.GroupRules...)
	if id.Default != nil {
		blocks = append(blocks, *id.Default)
	}
	return blocks
}
