package statuspage

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Keys admits a page's API calls that carry one of the gateway's keys. Tokens
// are compared as SHA-256 digests in constant time against every key, as
// the gateway compares its callers'. A nil *Keys admits every call (the
// admin endpoint, which Caddy guards itself).
type Keys struct {
	digests [][sha256.Size]byte
}

// NewKeys admits the given tokens.
func NewKeys(tokens []string) *Keys {
	k := &Keys{}
	for _, t := range tokens {
		k.digests = append(k.digests, sha256.Sum256([]byte(t)))
	}
	return k
}

// allow reports whether r carries an accepted key.
func (k *Keys) allow(r *http.Request) bool {
	if k == nil {
		return true
	}
	token := ""
	if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		token = strings.TrimSpace(v[7:])
	} else {
		token = r.Header.Get("X-Api-Key")
	}
	if token == "" {
		return false
	}
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range k.digests {
		ok |= subtle.ConstantTimeCompare(d[:], k.digests[i][:])
	}
	return ok == 1
}
