package keystore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The store alone proves nothing: without the secret it was hashed with,
// no issued key is accepted, none can be issued, and the store says why.
func TestAStoreWithoutItsSecretRefusesEveryKeyAndSaysWhy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openIn(t, dir, nil, nil)
	token := issue(t, s, spec("alice"))
	s.Close()
	if err := os.Remove(filepath.Join(dir, "keys.secret")); err != nil {
		t.Fatal(err)
	}
	var told []error
	s = openIn(t, dir, nil, func(err error) { told = append(told, err) })
	defer s.Close()
	if found(t, s, token) != "" || !s.Degraded() {
		t.Fatal("a key was accepted without its secret")
	}
	if len(told) != 1 || !strings.Contains(told[0].Error(), "another secret") || !strings.Contains(told[0].Error(), "keys.secret") {
		t.Fatalf("told %v", told)
	}
	if _, _, err := s.Issue(spec("bob")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issued with another secret: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keys.secret")); err == nil {
		t.Fatal("a new secret was made over the keys of the old one")
	}
}

func TestAGivenSecretWritesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Config{Path: filepath.Join(dir, "quota.db"), Secret: strings.Repeat("s", 40), SecretPath: filepath.Join(dir, "keys.secret")})
	if err != nil {
		t.Fatal(err)
	}
	token := issue(t, s, spec("alice"))
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "keys.secret")); err == nil {
		t.Fatal("a secret file was written beside a given secret")
	}
	s, err = Open(Config{Path: filepath.Join(dir, "quota.db"), Secret: strings.Repeat("t", 40)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if found(t, s, token) != "" || !s.Degraded() {
		t.Fatal("another given secret finds the key")
	}
}
