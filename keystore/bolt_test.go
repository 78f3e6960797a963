package keystore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func openIn(t *testing.T, dir string, clk clock.Clock, onError func(error)) *Store {
	t.Helper()
	s, err := Open(Config{Path: filepath.Join(dir, "quota.db"), SecretPath: filepath.Join(dir, "keys.secret"), Clock: clk, OnError: onError})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dataFiles are the bytes of every file under dir.
func dataFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = b
		}
		return nil
	})
	return out
}

func TestKeysSurviveARestartAndNoFileHoldsAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewFake()
	s := openIn(t, dir, clk, nil)
	alice := issue(t, s, spec("alice", "qwen"))
	old := issue(t, s, spec("bob"))
	_, bob, err := s.Rotate("bob", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	found(t, s, alice)
	s.Charge("alice", 42)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := dataFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("the data folder holds %d files, want the store and the secret", len(files))
	}
	for path, b := range files {
		for _, token := range []string{alice, old, bob} {
			if bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(strings.TrimPrefix(token, tokenPrefix))) {
				t.Fatalf("%s holds a token", path)
			}
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "keys.secret")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the secret file: %v %v", info, err)
	}

	s = openIn(t, dir, clk, nil)
	defer s.Close()
	if found(t, s, alice) != "alice" || found(t, s, bob) != "bob" || found(t, s, old) != "bob" {
		t.Fatal("a restart lost a key")
	}
	k, _ := s.Get("alice")
	if k.Requests != 2 || k.TokensUsed != 42 || k.Note != "a test's" || k.Models[0] != "qwen" {
		t.Fatalf("after a restart: %+v", k)
	}
	clk.Advance(time.Hour)
	if found(t, s, old) != "" {
		t.Fatal("an old token outlived its overlap across a restart")
	}
}

// A file another process holds (a second server, caddy validate beside a
// running one) is no reason to refuse a config: no issued key is accepted
// until it is free, and then every one is.
func TestAFileHeldElsewhereIsTakenOnceFree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openIn(t, dir, nil, nil)
	token := issue(t, s, spec("alice"))
	s.Close()
	other, err := bolt.Open(filepath.Join(dir, "quota.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	var told []error
	s = openIn(t, dir, clk, func(err error) { told = append(told, err) })
	defer s.Close()
	if found(t, s, token) != "" || len(told) != 1 || !strings.Contains(told[0].Error(), "held by another process") {
		t.Fatalf("held: told %v", told)
	}
	if _, _, err := s.Issue(spec("bob")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issued into a held file: %v", err)
	}
	other.Close()
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	if found(t, s, token) != "alice" || s.Degraded() || len(told) != 2 || told[1] != nil {
		t.Fatalf("once free: told %v", told)
	}
}
