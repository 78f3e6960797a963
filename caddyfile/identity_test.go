package caddyfile

import (
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestParseIdentity(t *testing.T) {
	cfg := parse(t, `llm_gateway {
	identity {http.auth.user.id} {
		groups {http.request.header.Remote-Groups}
		user alice {
			models gpt-4o
			tokens 100k/d
		}
		group eng {
			models gpt-4o
			rate 60/m
			priority 5
		}
		default {
			rate 10/m
			hedge off
		}
	}`+remote+`
}`)
	id := cfg.Identity
	if id == nil || id.User != "{http.auth.user.id}" || id.Groups != "{http.request.header.Remote-Groups}" {
		t.Fatalf("%+v", id)
	}
	if len(id.Users) != 1 || id.Users[0].Name != "alice" || id.Users[0].Tokens[0].String() != "100k/d" {
		t.Fatalf("users %+v", id.Users)
	}
	if len(id.GroupRules) != 1 || id.GroupRules[0].Name != "eng" || id.GroupRules[0].Priority != 5 {
		t.Fatalf("groups %+v", id.GroupRules)
	}
	if id.Default == nil || !id.Default.NoHedge || id.Default.Rate[0].String() != "10/m" {
		t.Fatalf("default %+v", id.Default)
	}
	if plain := parse(t, "llm_gateway {\n\tidentity {http.auth.user.id}"+remote+"\n}"); plain.Identity == nil || plain.Identity.Default != nil {
		t.Fatalf("%+v", plain.Identity)
	}
}

func TestParseIdentityErrors(t *testing.T) {
	for input, want := range map[string]string{
		"\tidentity\n":                     "identity takes the placeholder",
		"\tidentity alice\n":               "identity takes a placeholder that names who is asking",
		"\tidentity {a}\n\tidentity {b}\n": "identity is given twice",
		"\tidentity {a} {\n\t\tuser bob {\n\t\t\toperator\n\t\t}\n\t}\n":     "identity user bob: an identity is never an operator",
		"\tidentity {a} {\n\t\tuser bob\n\t\tuser bob\n\t}\n":                "user bob is given twice",
		"\tidentity {a} {\n\t\tgroup eng {\n\t\t\tmodels nope\n\t\t}\n\t}\n": `identity group eng: models: "nope" is no model or pool`,
		"\tidentity {a} {\n\t\tdefault {\n\t\t\tratee 5/m\n\t\t}\n\t}\n":     `unknown key subdirective "ratee" in identity default (did you mean rate?)`,
		"\tidentity {a} {\n\t\tusers bob\n\t}\n":                             `unknown identity subdirective "users" (did you mean user?)`,
		"\tidentity {a} {\n\t\tdefault\n\t\tdefault\n\t}\n":                  "default is set twice",
		"\tidentity {a} {\n\t\tgroups eng\n\t}\n":                            "groups takes a placeholder",
		"\tidentity {a}\n\tkey user:bob sk-0123456789abcdef\n":               "is an identity's",
	} {
		_, err := Parse(cf.NewTestDispenser("llm_gateway {\n" + input + remote + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: got %v, want %q with file:line", input, err, want)
		}
	}
}
