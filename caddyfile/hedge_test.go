package caddyfile

import (
	"strconv"
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestHedgeLinesThatAreWrongNameTheLine(t *testing.T) {
	for _, tc := range []struct{ name, line, msg string }{
		{"no value", "hedge_after", "hedge_after takes a duration such as 800ms, auto, or off"},
		{"a bare number", "hedge_after 800", `hedge_after takes a duration such as 800ms, auto, or off, not "800"`},
		{"a negative delay", "hedge_after -1s", `not "-1s"`},
		{"a budget without %", "hedge_budget 0.1", `hedge_budget takes a share of requests from 0% to 100%, such as 10%, not "0.1"`},
		{"a budget over 100%", "hedge_budget 150%", `not "150%"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, block := range []string{
				"llm_gateway {\n\tengine e {\n\t\tto http://127.0.0.1:1\n\t\tmodels m\n\t\t" + tc.line + "\n\t}\n}",
				"llm_gateway {" + remote + "\n\tpool p {\n\t\tmember openai\n\t\t" + tc.line + "\n\t}\n}",
			} {
				_, err := Parse(cf.NewTestDispenser(block))
				if err == nil || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("%v, want %q", err, tc.msg)
				}
				if want := strings.Count(block[:strings.Index(block, tc.line)], "\n") + 1; !strings.Contains(err.Error(), "Testfile:"+strconv.Itoa(want)) {
					t.Fatalf("%v, want line %d", err, want)
				}
			}
		})
	}
	_, err := Parse(cf.NewTestDispenser("llm_gateway {\n\tkey k sk-0123456789abcdef {\n\t\thedge maybe\n\t}" + remote + "\n}"))
	if err == nil || !strings.Contains(err.Error(), `hedge takes off`) || !strings.Contains(err.Error(), "Testfile:3") {
		t.Fatalf("key hedge maybe: %v", err)
	}
}
