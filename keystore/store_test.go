package keystore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// embedded opens a store in a fresh data folder, on fake time.
func embedded(t *testing.T) (*Store, *clock.Fake, string) {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewFake()
	s, err := Open(Config{Path: filepath.Join(dir, "quota.db"), SecretPath: filepath.Join(dir, "keys.secret"), Max: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk, dir
}

func spec(name string, models ...string) Spec {
	return Spec{Key: config.Key{Name: name, Models: models}, Note: "a test's"}
}

func issue(t *testing.T, s *Store, sp Spec) string {
	t.Helper()
	k, token, err := s.Issue(sp)
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != sp.Name || !strings.HasPrefix(token, tokenPrefix) || len(token) != len(tokenPrefix)+43 {
		t.Fatalf("issued %+v with a token of %d characters", k, len(token))
	}
	return token
}

// found is the name of the key a token finds, "" for none.
func found(t *testing.T, s *Store, token string) string {
	t.Helper()
	kr, err := s.Find(token)
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	if kr == nil {
		return ""
	}
	return kr.Name
}

func TestAnIssuedTokenFindsItsKeysRules(t *testing.T) {
	t.Parallel()
	s, _, _ := embedded(t)
	sp := spec("alice", "qwen")
	sp.Rate = []quota.Limit{{N: 60, Window: quota.Minute}}
	sp.Priority = 3
	token := issue(t, s, sp)
	kr, err := s.Find(token)
	if err != nil || kr == nil {
		t.Fatalf("%v %v", kr, err)
	}
	if kr.Name != "alice" || !kr.Allows("qwen") || kr.Allows("other") || kr.Priority != 3 || len(kr.Limits.Rate) != 1 {
		t.Fatalf("%+v", kr)
	}
	for _, wrong := range []string{"", token + "x", token[:len(token)-1], strings.ToUpper(token), "sk-llmgw-"} {
		if name := found(t, s, wrong); name != "" {
			t.Errorf("%q found %s", wrong, name)
		}
	}
	if got := s.All(); len(got) != 1 || got[0] != kr {
		t.Fatalf("all: %+v", got)
	}
}

func TestAKeyPastItsExpirySaysSo(t *testing.T) {
	t.Parallel()
	s, clk, _ := embedded(t)
	sp := spec("temp")
	sp.Expires = clk.Now().Add(time.Hour)
	token := issue(t, s, sp)
	clk.Advance(time.Hour - time.Millisecond)
	if found(t, s, token) != "temp" {
		t.Fatal("refused before its expiry")
	}
	clk.Advance(time.Millisecond)
	kr, err := s.Find(token)
	var exp *keys.ExpiredError
	if kr != nil || !errors.As(err, &exp) || exp.Name != "temp" || !exp.At.Equal(sp.Expires) {
		t.Fatalf("at its expiry: %v %v", kr, err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatal("the refusal names the token")
	}
	// an operator may give it more time
	if _, err := s.Update("temp", func(sp *Spec) error { sp.Expires = clk.Now().Add(time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	if found(t, s, token) != "temp" {
		t.Fatal("refused after its expiry moved")
	}
}

func TestUseCountsRequestsTokensAndLastUse(t *testing.T) {
	t.Parallel()
	s, clk, _ := embedded(t)
	token := issue(t, s, spec("erin"))
	for range 3 {
		clk.Advance(time.Second)
		found(t, s, token)
	}
	s.Charge("erin", 120)
	s.Charge("not-issued", 5)
	k, _ := s.Get("erin")
	if k.Requests != 3 || k.TokensUsed != 120 || !k.LastUsed.Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Fatalf("%+v", k.Use)
	}
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.Get("erin"); k.Requests != 3 || k.TokensUsed != 120 {
		t.Fatalf("after a save: %+v", k.Use)
	}
}
