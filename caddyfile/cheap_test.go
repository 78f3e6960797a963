package caddyfile

import (
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// A pool's prefer cheap and a key's cheap_at share reach the config.
func TestPreferCheapAndCheapAtAreRead(t *testing.T) {
	cfg := parse(t, "llm_gateway {"+remote+`
	pool p {
		member openai
		prefer cheap
	}
	key k sk-0123456789abcdef {
		spend 10/d cheap_at 80% 200/mo
	}
}`)
	if got := cfg.Pools[0].Prefer; got != "cheap" {
		t.Fatalf("prefer %q", got)
	}
	k := cfg.Keys[0]
	if k.CheapAt != 80 || len(k.Spend) != 2 || k.Spend[0].String() != "10/d" || k.Spend[1].String() != "200/mo" {
		t.Fatalf("cheap_at %d, spend %v", k.CheapAt, k.Spend)
	}
}

// Their mistakes, each with its line.
func TestPreferCheapAndCheapAtErrorsNameTheProblemAndTheLine(t *testing.T) {
	for _, tc := range []struct{ name, block, want string }{
		{"prefer what", "pool p {\n\t\tmember openai\n\t\tprefer fast\n\t}", "prefer takes cheap: prefer cheap, at Testfile:4"},
		{"prefer twice", "pool p {\n\t\tmember openai\n\t\tprefer cheap\n\t\tprefer cheap\n\t}", "prefer"},
		{"no share", "key k sk-0123456789abcdef {\n\t\tspend 1/d cheap_at\n\t}", "key k: cheap_at takes a share of the money budget: spend 10/d cheap_at 80%, at Testfile:3"},
		{"no percent", "key k sk-0123456789abcdef {\n\t\tspend 1/d cheap_at 80\n\t}", `key k: cheap_at takes a share from 1% to 100%, such as 80%, not "80", at Testfile:3`},
		{"past all", "key k sk-0123456789abcdef {\n\t\tspend 1/d cheap_at 120%\n\t}", `not "120%"`},
		{"a team's", "team t {\n\t\tspend 1/d cheap_at 80%\n\t}", "team t: cheap_at is a key's (spend 10/d cheap_at 80%), not a team's, at Testfile:3"},
		{"no budget", "key k sk-0123456789abcdef {\n\t\tspend cheap_at 80%\n\t}", "spend takes budgets in US dollars per window, such as 1/d or 50/mo, at Testfile:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser("llm_gateway {\n\t" + tc.block + remote + "\n}"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
