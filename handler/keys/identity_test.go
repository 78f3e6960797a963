package keys

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

func identities() *Identities {
	return NewIdentities(&config.Identity{
		User: "{http.auth.user.id}",
		Users: []config.Key{
			{Name: "alice", Models: []string{"big"}},
		},
		GroupRules: []config.Key{
			{Name: "eng", Models: []string{"big", "small"}, Rate: []quota.Limit{{N: 60, Window: quota.Minute}}},
			{Name: "sales", Models: []string{"small"}},
		},
		Default: &config.Key{Models: []string{"tiny"}},
	})
}

// An identity gets its user block, else its first group's (in the
// config's order), else the default's, under a name of its own.
func TestAnIdentityGetsItsBlocksRulesUnderItsOwnName(t *testing.T) {
	t.Parallel()
	ids := identities()
	for _, tc := range []struct {
		id     Identity
		allows string // a model its block allows and the next does not
		name   string
	}{
		{Identity{User: "alice", Groups: []string{"sales"}}, "big", "user:alice"},
		{Identity{User: "bob", Groups: []string{"sales", "eng"}}, "big", "user:bob"}, // eng is first in the config
		{Identity{User: "carol", Groups: []string{"sales"}}, "small", "user:carol"},
		{Identity{User: "dave"}, "tiny", "user:dave"},
	} {
		kr, gerr := ids.rules(tc.id)
		if gerr != nil || kr.Name != tc.name || !kr.Allows(tc.allows) {
			t.Errorf("%+v: %+v %v", tc.id, kr, gerr)
		}
	}
	// two users of one block count apart, on the block's rules
	b1, _ := ids.rules(Identity{User: "bob", Groups: []string{"eng"}})
	e1, _ := ids.rules(Identity{User: "erin", Groups: []string{"eng"}})
	if b1.Name == e1.Name || len(e1.Limits.Rate) != 1 {
		t.Fatalf("%+v %+v", b1, e1)
	}
	if seen := ids.Seen(); len(seen) != 2 {
		t.Fatalf("the identities with limits seen: %d", len(seen))
	}
}

func TestAnIdentityWithoutABlockOrAName(t *testing.T) {
	t.Parallel()
	noDefault := NewIdentities(&config.Identity{User: "{http.auth.user.id}", Users: []config.Key{{Name: "alice"}}})
	for _, tc := range []struct {
		ids  *Identities
		id   Identity
		says string
	}{
		{noDefault, Identity{User: "mallory"}, "user mallory has no rules here"},
		{noDefault, Identity{User: strings.Repeat("a", maxIdentity+1)}, "over 256 bytes"},
		{noDefault, Identity{User: "a\nb"}, "not text"},
		{noDefault, Identity{User: "alice", Groups: make([]string, maxGroups+1)}, "over 64 groups"},
	} {
		kr, gerr := tc.ids.rules(tc.id)
		if kr != nil || gerr == nil || gerr.Status != 403 || gerr.Code != "identity_not_allowed" || !strings.Contains(gerr.Message, tc.says) {
			t.Errorf("%q: %+v %+v", tc.id.User, kr, gerr)
		}
	}
}

// The door: an identity comes before a token (a JWT in Authorization is
// the JWT module's, not a gateway key); without one, keys as ever.
func TestWhoPutsAnIdentityBeforeAToken(t *testing.T) {
	t.Parallel()
	w := &Who{Ring: ring(), Identities: identities()}
	r := WithIdentity(request("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.a-jwt.sig"), Identity{User: "alice"})
	if kr, gerr := w.Check(r); gerr != nil || kr.Name != "user:alice" {
		t.Fatalf("%+v %v", kr, gerr)
	}
	if kr, gerr := w.Check(request("Authorization", "Bearer "+teamToken)); gerr != nil || kr.Name != "team" {
		t.Fatalf("a key without an identity: %+v %v", kr, gerr)
	}
	if WithIdentity(request(), Identity{}) == nil {
		t.Fatal("no request")
	}
	identitiesOnly := &Who{Identities: identities()}
	_, gerr := identitiesOnly.Check(WithIdentity(request(), Identity{}))
	if gerr == nil || gerr.Status != 401 || !strings.Contains(gerr.Message, "no identity authenticated by Caddy") {
		t.Fatalf("no identity, no key: %+v", gerr)
	}
}

func TestSplitGroups(t *testing.T) {
	t.Parallel()
	if got := strings.Join(SplitGroups(" eng, ops ,,sales "), "|"); got != "eng|ops|sales" {
		t.Fatalf("%q", got)
	}
	if SplitGroups("") != nil {
		t.Fatal("no groups")
	}
}
