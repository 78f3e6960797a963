package caddyfile

import (
	"fmt"
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Warm swaps' syntax; the whole of it parses in
// testdata/warmswap.caddyfile (TestParseGolden).

func TestWarmSwapParseErrorsNameTheProblemAndTheLine(t *testing.T) {
	engine := func(lines string) string {
		return "llm_gateway {\n\tengine a {\n\t\tcmd vllm serve --port {engine.port}\n\t\tto http://127.0.0.1:{engine.port}\n\t\tmodels a\n" + lines + "\t}\n}"
	}
	for _, tc := range []struct {
		name, input, msg string
		line             int
	}{
		{"swap without a mode", engine("\t\tswap\n"), "swap takes stop or sleep", 6},
		{"an unknown mode", engine("\t\tswap hibernate\n"), `swap takes stop or sleep, not "hibernate"`, 6},
		{"a block under swap stop", engine("\t\tswap stop {\n\t\t\twake_path /w\n\t\t}\n"), "swap stop takes no block", 7},
		{"an unknown sleep option", engine("\t\tswap sleep {\n\t\t\tlevel 2\n\t\t}\n"), `unknown swap subdirective "level" in swap sleep`, 7},
		{"a path without its slash", engine("\t\tswap sleep {\n\t\t\tsleep_path sleep\n\t\t}\n"), `sleep_path takes a path starting with '/', not "sleep"`, 7},
		{"a sleep option twice", engine("\t\tswap sleep {\n\t\t\twake_path /a\n\t\t\twake_path /b\n\t\t}\n"), "wake_path is set twice in this block (first at Testfile:7)", 8},
		{"sleep_after without swap sleep", engine("\t\tsleep_after 5m\n"), "sleep paths and sleep_after are for swap sleep", 2},
		{"sleep_after not before idle_timeout", engine("\t\tswap sleep\n\t\tsleep_after 10m\n\t\tidle_timeout 5m\n"), "idle_timeout (5m0s) must be longer than sleep_after (10m0s)", 2},
		{"slots without save", engine("\t\tslots /var/cache\n"), "slots takes save and the engine's slot directory", 6},
		{"slots save without a directory", engine("\t\tslots save\n"), "slots takes save and the engine's slot directory", 6},
		{"a slot path without {id}", engine("\t\tslots save /d {\n\t\t\tsave_path /slots/0\n\t\t}\n"), "save_path takes a path starting with '/' with {id} for the slot", 7},
		{"a timeout without its unit", engine("\t\tslots save /d {\n\t\t\ttimeout 3\n\t\t}\n"), "a duration needs a unit", 7},
		{"parallel 0", engine("\t\tslots save /d {\n\t\t\tparallel 0\n\t\t}\n"), "parallel", 7},
		{"an unknown slots option", engine("\t\tslots save /d {\n\t\t\tslots 4\n\t\t}\n"), `unknown slots subdirective "slots" in slots save`, 7},
		{"swap sleep on a remote engine", "llm_gateway {\n\tengine a {\n\t\tto http://10.0.0.1:8000\n\t\tmodels a\n\t\tswap sleep\n\t}\n}", "swap sleep and slots are for an engine the gateway starts", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser(tc.input))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.input)
			}
			at := fmt.Sprintf(", at Testfile:%d", tc.line)
			if !strings.Contains(err.Error(), tc.msg) || !strings.HasSuffix(err.Error(), at) {
				t.Errorf("got %q\nwant it to say %q and end with %q", err, tc.msg, at)
			}
		})
	}
}

func TestEverySwapAndSlotsSubdirectiveIsKnown(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		names []string
		block func(string) string
	}{
		{"swap", swapOptions, func(n string) string {
			return "llm_gateway {\n\tengine e {\n\t\tswap sleep {\n\t\t\t" + n + "\n\t\t}\n\t}\n}"
		}},
		{"slots", slotsOptions, func(n string) string {
			return "llm_gateway {\n\tengine e {\n\t\tslots save /d {\n\t\t\t" + n + "\n\t\t}\n\t}\n}"
		}},
	} {
		for _, name := range tc.names {
			_, err := Parse(cf.NewTestDispenser(tc.block(name)))
			if err != nil && strings.Contains(err.Error(), "unknown "+tc.kind+" subdirective") {
				t.Errorf("%s lists %s, which the parser does not know: %v", tc.kind, name, err)
			}
		}
	}
}
