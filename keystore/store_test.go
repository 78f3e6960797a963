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

func TestIssueRefusesWhatTheStoreWouldNotKeep(t *testing.T) {
	t.Parallel()
	s, clk, _ := embedded(t)
	issue(t, s, spec("taken"))
	long := strings.Repeat("n", MaxNote+1)
	for _, tc := range []struct {
		spec Spec
		want error
		says string
	}{
		{spec("taken"), ErrExists, "issued already"},
		{spec("has space"), ErrInvalid, "letters, digits"},
		{spec("user:alice"), ErrInvalid, "letters, digits"},
		{spec(""), ErrInvalid, "letters, digits"},
		{Spec{Key: config.Key{Name: "v", Value: "a-token-of-my-own-123"}}, ErrInvalid, "made by the gateway"},
		{Spec{Key: config.Key{Name: "op", Operator: true}}, ErrInvalid, "never an operator"},
		{Spec{Key: config.Key{Name: "n"}, Note: long}, ErrInvalid, "note"},
		{Spec{Key: config.Key{Name: "e"}, Expires: clk.Now().Add(-time.Second)}, ErrInvalid, "has passed"},
	} {
		_, token, err := s.Issue(tc.spec)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || token != "" {
			t.Errorf("%q: %v", tc.spec.Name, err)
		}
	}
	issue(t, s, spec("two"))
	issue(t, s, spec("three"))
	if _, _, err := s.Issue(spec("four")); !errors.Is(err, ErrFull) {
		t.Fatalf("over max: %v", err)
	}
	if err := s.Revoke("two"); err != nil {
		t.Fatal(err)
	}
	issue(t, s, spec("four")) // a revoke makes room
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

func TestRotationKeepsTheOldTokenForItsOverlapOnly(t *testing.T) {
	t.Parallel()
	s, clk, _ := embedded(t)
	old := issue(t, s, spec("bob"))
	k, fresh, err := s.Rotate("bob", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if fresh == old || !k.Rotated.Equal(clk.Now()) || !k.OldUntil.Equal(clk.Now().Add(10*time.Minute)) {
		t.Fatalf("%+v", k)
	}
	if found(t, s, fresh) != "bob" || found(t, s, old) != "bob" {
		t.Fatal("within the overlap both tokens are bob's")
	}
	clk.Advance(10 * time.Minute)
	if found(t, s, old) != "" || found(t, s, fresh) != "bob" {
		t.Fatal("past the overlap the old token is refused, the new one not")
	}
	if k, _ := s.Get("bob"); !k.OldUntil.IsZero() {
		t.Fatalf("the list still says an old token is accepted: %+v", k)
	}
	// no overlap: the old token is refused at once
	_, third, err := s.Rotate("bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	if found(t, s, fresh) != "" || found(t, s, third) != "bob" {
		t.Fatal("a rotation without overlap keeps the old token")
	}
	if _, _, err := s.Rotate("bob", MaxOverlap+time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an overlap past the most: %v", err)
	}
	if _, _, err := s.Rotate("nobody", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rotating no key: %v", err)
	}
}

func TestRevokeRefusesEveryTokenOfTheKeyAtOnce(t *testing.T) {
	t.Parallel()
	s, _, _ := embedded(t)
	old := issue(t, s, spec("carol"))
	_, fresh, err := s.Rotate("carol", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke("carol"); err != nil {
		t.Fatal(err)
	}
	if found(t, s, old) != "" || found(t, s, fresh) != "" {
		t.Fatal("a revoked key's tokens are accepted")
	}
	if len(s.List()) != 0 || len(s.All()) != 0 {
		t.Fatalf("%+v", s.List())
	}
	if err := s.Revoke("carol"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
}

func TestUpdateChangesRulesAndKeepsNameAndToken(t *testing.T) {
	t.Parallel()
	s, clk, _ := embedded(t)
	token := issue(t, s, spec("dave", "qwen"))
	clk.Advance(time.Minute)
	k, err := s.Update("dave", func(sp *Spec) error {
		sp.Name = "someone-else" // the name stays
		sp.Models = []string{"small"}
		sp.Note = "moved to the small model"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "dave" || k.Note != "moved to the small model" || !k.Updated.Equal(clk.Now()) {
		t.Fatalf("%+v", k)
	}
	kr, _ := s.Find(token)
	if kr == nil || !kr.Allows("small") || kr.Allows("qwen") {
		t.Fatalf("the token finds %+v", kr)
	}
	refused := errors.New("no")
	if _, err := s.Update("dave", func(*Spec) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("%v", err)
	}
	if _, err := s.Update("dave", func(sp *Spec) error { sp.Operator = true; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("made an operator: %v", err)
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
