package caddyfile

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/history"
)

func TestParseHistory(t *testing.T) {
	for input, want := range map[string]*history.Config{
		"":                nil,
		"\thistory\n":     {},
		"\thistory off\n": {Off: true},
		"\thistory {\n\t\tkeep 5000\n\t\tmax_age 1d\n\t\tmemory\n\t}\n": {Keep: 5000, MaxAge: caddy.Duration(24 * time.Hour), Memory: true},
	} {
		m, err := ParseModule(cf.NewTestDispenser("llm_gateway {\n" + input + remote + "\n}"))
		h := m.History
		if err != nil {
			t.Fatalf("%q: %v", input, err)
		}
		if (h == nil) != (want == nil) || h != nil && *h != *want {
			t.Errorf("%q: got %+v, want %+v", input, h, want)
		}
	}
}

func TestParseHistoryErrors(t *testing.T) {
	for input, want := range map[string]string{
		"\thistory on\n":                        `history takes off or a block, not "on"`,
		"\thistory off {\n\t\tkeep 5\n\t}\n":    "history off takes no block",
		"\thistory {\n\t\tkeep 0\n\t}\n":        "keep takes a count of 1 or more",
		"\thistory {\n\t\tkeep 99999999\n\t}\n": "history keep 99999999: want 1 to 10000000",
		"\thistory {\n\t\tmax_age 7\n\t}\n":     "a duration needs a unit",
		"\thistory {\n\t\tkeeep 5\n\t}\n":       `unknown history subdirective "keeep"`,
		"\thistory\n\thistory off\n":            "history is given twice",
	} {
		_, err := ParseModule(cf.NewTestDispenser("llm_gateway {\n" + input + remote + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: got %v, want %q with file:line", input, err, want)
		}
	}
}
