package caddyfile

import (
	"encoding/json"
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAPoolTakesItsMembersFromCaddysDynamicUpstreams(t *testing.T) {
	cfg := parse(t, `llm_gateway {
	engine node {
		to http://nodes.invalid:8080
		models node
		model_name demo
	}
	pool demo {
		template node
		dynamic srv _llm._tcp.nodes.llm.svc.cluster.local {
			refresh 10s
		}
	}
}`)
	p := cfg.Pools[0]
	var src map[string]any
	if err := json.Unmarshal(p.Dynamic, &src); err != nil {
		t.Fatal(err)
	}
	if p.Template != "node" || src["source"] != "srv" || src["name"] != "_llm._tcp.nodes.llm.svc.cluster.local" || src["refresh"] != float64(10e9) {
		t.Fatalf("template %q, source %s", p.Template, p.Dynamic)
	}
	for _, tc := range []struct{ input, want string }{
		{"dynamic", "dynamic takes a source of members"},
		{"dynamic nosuch", "nosuch"},
		{"template", "wrong argument count"},
	} {
		_, err := Parse(cf.NewTestDispenser("llm_gateway {" + remote + "\n\tpool p {\n\t\t" + tc.input + "\n\t}\n}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: got %v, want %q with file:line", tc.input, err, tc.want)
		}
	}
}
