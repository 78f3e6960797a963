package caddyfile

import (
	"strconv"
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestParseWarmSpare(t *testing.T) {
	for line, want := range map[string]int{"warm_spare": 1, "warm_spare 3": 3} {
		cfg := parse(t, "llm_gateway {"+remote+"\n\tpool p {\n\t\tmember openai\n\t\t"+line+"\n\t}\n}")
		if got := cfg.Pools[0].WarmSpare; got != want {
			t.Fatalf("%s: %d, want %d", line, got, want)
		}
	}
	for line, msg := range map[string]string{
		"warm_spare 0":   `warm_spare takes a count of waiting requests of 1 or more, not "0"`,
		"warm_spare two": `not "two"`,
		"warm_spare 1 2": "warm_spare takes at most one count",
	} {
		block := "llm_gateway {" + remote + "\n\tpool p {\n\t\tmember openai\n\t\t" + line + "\n\t}\n}"
		_, err := Parse(cf.NewTestDispenser(block))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want %q", line, err, msg)
		}
		if want := strings.Count(block[:strings.Index(block, line)], "\n") + 1; !strings.Contains(err.Error(), "Testfile:"+strconv.Itoa(want)) {
			t.Fatalf("%s: %v, want line %d", line, err, want)
		}
	}
}
