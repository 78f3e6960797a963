package keystore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// secret is the key of the tokens' hash (HMAC-SHA256), with its check
// value: an HMAC of a constant, which the store keeps so that a front door
// with another secret finds out at once (the package doc).
type secret struct {
	check []byte
	pool  sync.Pool // of hash.Hash keyed with the secret: no allocation per Find
}

// checkLabel is what the check value is the HMAC of.
const checkLabel = "llm_gateway issued keys: secret check"

func newSecret(key []byte) *secret {
	s := &secret{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	m := hmac.New(sha256.New, key)
	m.Write([]byte(checkLabel))
	s.check = m.Sum(nil)[:16]
	return s
}

// sum is the hash a token is stored as.
func (s *secret) sum(token string) [sha256.Size]byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(token))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	s.pool.Put(h)
	return out
}

// matches reports whether a stored check value is this secret's; a store
// with none (no key issued yet) matches any.
func (s *secret) matches(check []byte) bool {
	return len(check) == 0 || s != nil && hmac.Equal(check, s.check)
}

// readSecretFile reads the generated secret; nil, nil when the file does
// not exist (no key was issued yet).
func readSecretFile(path string) (*secret, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the issued keys' secret: %v", err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 32 {
		return nil, fmt.Errorf("the issued keys' secret %s holds %d characters, not a secret this gateway wrote (64): restore it, or remove it with every issued key", path, len(key))
	}
	return newSecret([]byte(key)), nil
}

// makeSecretFile generates the secret into its own file (mode 0600), or
// reads the one another handle wrote first.
func makeSecretFile(path string) (*secret, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("the issued keys' secret: %v", err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key := hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readSecretFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the issued keys' secret: %v", err)
	}
	_, err = f.WriteString(key + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("writing the issued keys' secret: %v", err)
	}
	return newSecret([]byte(key)), nil
}
