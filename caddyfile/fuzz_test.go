package caddyfile

import (
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// FuzzParse feeds arbitrary directive bodies to the parser: it must return a
// config or an error, never panic, and a config it returns must pass the
// handler's own validation.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"llm_gateway {\n engine a {\n to http://127.0.0.1:1\n models m\n }\n}",
		"llm_gateway {\n keys {env.K} a,b\n max_body 1MiB\n wake off\n engine a {\n cmd x --port {engine.port}\n to http://127.0.0.1:{engine.port}\n models m n\n fallback b\n fallback_after 1s\n }\n engine b {\n to https://x\n models o\n prefill on\n }\n pool auto {\n member a\n member b/o\n sticky header X\n failover 2 1s\n breaker 1 1s\n }\n}",
		"llm_gateway {\n engine a {\n to\n }\n}",
		"llm_gateway {\n pool p {\n member\n }\n}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		tokens, err := cf.Tokenize([]byte(input), "Fuzzfile")
		if err != nil || len(tokens) == 0 {
			return
		}
		cfg, err := Parse(cf.NewDispenser(tokens))
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a config the handler refuses: %v\n%s", err, input)
		}
	})
}
