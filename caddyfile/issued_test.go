package caddyfile

import (
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestParseIssuedKeys(t *testing.T) {
	t.Setenv("LLMGW_TEST_KEYS_SECRET", strings.Repeat("s", 40))
	for input, want := range map[string]*hconfig.IssuedKeys{
		"":                nil,
		"\tissued_keys\n": {},
		"\tissued_keys {\n\t\tsecret {env.LLMGW_TEST_KEYS_SECRET}\n\t\tmax 50\n\t}\n":                   {Secret: "{env.LLMGW_TEST_KEYS_SECRET}", Max: 50},
		"\tissued_keys {\n\t\tsecret {env.LLMGW_TEST_KEYS_SECRET}\n\t}\n\tstore redis 127.0.0.1:6379\n": {Secret: "{env.LLMGW_TEST_KEYS_SECRET}"},
		"\tissued_keys {\n\t\tsecret 0123456789abcdef0123456789abcdef\n\t}\n":                           {Secret: "0123456789abcdef0123456789abcdef"},
	} {
		cfg, err := Parse(cf.NewTestDispenser("llm_gateway {\n" + input + remote + "\n}"))
		if err != nil {
			t.Fatalf("%q: %v", input, err)
		}
		if got := cfg.IssuedKeys; (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("%q: got %+v, want %+v", input, got, want)
		}
	}
}

func TestParseIssuedKeysErrors(t *testing.T) {
	for input, want := range map[string]string{
		"\tissued_keys on\n":                                          "wrong argument count",
		"\tissued_keys\n\tissued_keys\n":                              "issued_keys is given twice",
		"\tissued_keys {\n\t\tsecret short\n\t}\n":                    "the secret is 5 characters long; use at least 32",
		"\tissued_keys {\n\t\tsecret {env.LLMGW_UNSET_SECRET}\n\t}\n": "{env.LLMGW_UNSET_SECRET} is empty",
		"\tissued_keys {\n\t\tmax 0\n\t}\n":                           "max takes a count of 1 or more",
		"\tissued_keys {\n\t\tmaxx 5\n\t}\n":                          `unknown issued_keys subdirective "maxx"`,
		"\tissued_keys\n\tstore redis 127.0.0.1:6379\n":               "issued_keys with store redis needs a secret",
	} {
		_, err := Parse(cf.NewTestDispenser("llm_gateway {\n" + input + remote + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: got %v, want %q with file:line", input, err, want)
		}
	}
}
