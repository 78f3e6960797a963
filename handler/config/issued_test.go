package config

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func TestIssuedKeysAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	eng := []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}
	redis := &StoreConfig{Redis: "127.0.0.1:6379"}
	for _, tc := range []struct {
		issued *IssuedKeys
		store  *StoreConfig
		want   string // "" for none
	}{
		{&IssuedKeys{}, nil, ""},
		{&IssuedKeys{Secret: "{env.LLM_KEYS_SECRET}"}, redis, ""}, // checked once resolved
		{&IssuedKeys{Secret: strings.Repeat("s", MinSecretLength)}, redis, ""},
		{&IssuedKeys{}, redis, "needs a secret"},
		{&IssuedKeys{Secret: "short"}, nil, "the secret is 5 characters long"},
		{&IssuedKeys{Max: -1}, nil, "max may not be negative"},
	} {
		err := Config{IssuedKeys: tc.issued, Store: tc.store, Engines: eng}.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v %+v: %v, want %q", tc.issued, tc.store, err, tc.want)
		}
	}
	if !(Config{IssuedKeys: &IssuedKeys{}}).HasLimits() {
		t.Fatal("issued keys may have limits: the counters are needed")
	}
	if (*IssuedKeys)(nil).MaxIssued() != DefaultMaxIssued || (&IssuedKeys{Max: 5}).MaxIssued() != 5 {
		t.Fatal("max")
	}
}

func TestAnIssuedKeysName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"alice": true, "dev-1.laptop_2": true, strings.Repeat("a", 64): true,
		"": false, "-dash": false, "user:alice": false, "a b": false, "a/b": false, strings.Repeat("a", 65): false, "é": false,
	} {
		if err := CheckIssuedName(name); (err == nil) != ok {
			t.Errorf("%q: %v", name, err)
		}
	}
}
