package caddyfile

import (
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// One token under two keys is refused with the line of the second and the
// first, also when the environment gives it to both: the handler refused it
// only once Caddy provisioned the config, with no line.
func TestOneTokenUnderTwoKeysIsRefusedAtItsLine(t *testing.T) {
	t.Setenv("ALICE_KEY", "shared-token-0123456789")
	t.Setenv("BOB_KEY", "shared-token-0123456789")
	t.Setenv("TEAM_KEYS", "other-token-0123456789,shared-token-0123456789")
	for _, tc := range []struct {
		name, input, want string
	}{
		{"two named keys from the environment", `llm_gateway {
	key alice {env.ALICE_KEY}
	key bob {env.BOB_KEY}` + remote + `
}`, "one token is given twice, as key alice (at Testfile:2) and as key bob: its rules would depend on the order; give each a token of its own, at Testfile:3"},
		{"keys from the environment and a named key", `llm_gateway {
	keys {env.TEAM_KEYS}` + remote + `
	key bob {env.BOB_KEY}
}`, "one token is given twice, as an unnamed key (keys …) (at Testfile:2) and as key bob: its rules would depend on the order; give each a token of its own, at Testfile:7"},
		{"a literal in keys and in a key block", `llm_gateway {
	key carol literal-token-0123456789 {
		models gpt-4o
	}` + remote + `
	keys literal-token-0123456789
}`, "one token is given twice, as key carol (at Testfile:2) and as an unnamed key (keys …): its rules would depend on the order; give each a token of its own, at Testfile:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser(tc.input))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "shared-token") || strings.Contains(err.Error(), "literal-token") {
				t.Fatal("the error prints the token")
			}
		})
	}
	t.Setenv("BOB_KEY", "bobs-own-token-0123456789")
	parse(t, `llm_gateway {
	key alice {env.ALICE_KEY}
	key bob {env.BOB_KEY}`+remote+`
}`)
}
