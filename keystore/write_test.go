package keystore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

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
		{Spec{Key: config.Key{Name: "s", Spend: make([]quota.SpendLimit, MaxLimits+1)}}, ErrInvalid, "spend limits"},
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
