package keystore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Spec is what an operator sets of an issued key: its name and rules (a
// config.Key without a token, never an operator), a note and an expiry.
// Spend budgets, once config.Key has them, are rules like the others.
type Spec struct {
	config.Key
	// Note says whose the key is or what it is for. Default: none.
	Note string `json:"note,omitempty"`
	// Expires is when the key stops being accepted. Default: never.
	Expires time.Time `json:"expires,omitzero"`
}

// Key is an issued key as the admin API and the page show it: what was
// set, its life and its use, never its token.
type Key struct {
	Spec
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated,omitzero"` // its rules' last change
	Rotated time.Time `json:"rotated,omitzero"` // its token's last change
	// OldUntil is when the token a rotation replaced stops being accepted,
	// while it still is.
	OldUntil time.Time `json:"old_token_until,omitzero"`
	Use
}

// Use is what a key was used for, over every front door sharing the store.
type Use struct {
	LastUsed   time.Time `json:"last_used,omitzero"`
	Requests   int64     `json:"requests"`    // every request that presented it
	TokensUsed int64     `json:"tokens_used"` // prompt and completion tokens of its answers
}

// record is a key as the store keeps it: the view's fields but its use,
// and the hashes of the tokens it accepts.
type record struct {
	Spec
	Created time.Time  `json:"created"`
	Updated time.Time  `json:"updated,omitzero"`
	Rotated time.Time  `json:"rotated,omitzero"`
	Hash    []byte     `json:"hash"`          // of the current token
	Old     []oldToken `json:"old,omitempty"` // replaced ones, within their overlap
}

// oldToken is a token a rotation replaced, accepted until Until.
type oldToken struct {
	Hash  []byte    `json:"hash"`
	Until time.Time `json:"until"`
}

// Limits of what an operator may set: a record stays small, and a store
// holds at most Config.Max of them.
const (
	MaxNote    = 1024
	MaxModels  = 256
	MaxLimits  = 8 // rate, tokens or spend limits of a key
	MaxOverlap = 30 * 24 * time.Hour
	// maxOld bounds the replaced tokens a key still accepts: rotating
	// again within an overlap drops the oldest.
	maxOld = 4
)

// The errors of the store's calls, for errors.Is; their texts name the
// key, never a token.
var (
	ErrExists      = errors.New("exists")
	ErrNotFound    = errors.New("not found")
	ErrFull        = errors.New("full")
	ErrInvalid     = errors.New("invalid")
	ErrUnavailable = errors.New("unavailable")
)

// Errorf is an error of one of the kinds above, in its own words: errors.Is
// finds the kind, the text says what happened.
func Errorf(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type refusal struct {
	kind error
	msg  string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

// check refuses a spec the store would not keep: a bad name, a token or
// operator mark set (the gateway makes tokens; an issued key is never an
// operator), an expiry in the past, too much of anything. The rules'
// meaning (known models, valid limits) is the caller's to check, against
// what its gateways serve (config.CheckRules).
func (s Spec) check(now time.Time) error {
	if err := config.CheckIssuedName(s.Name); err != nil {
		return Errorf(ErrInvalid, "%v", err)
	}
	invalid := func(format string, args ...any) error {
		return Errorf(ErrInvalid, "key %s: %s", s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Value != "":
		return invalid("an issued key's token is made by the gateway and shown once; send no value")
	case s.Operator:
		return invalid("an issued key is never an operator (give the operator a key of the Caddyfile)")
	case len(s.Note) > MaxNote:
		return invalid("the note is %d bytes long; at most %d", len(s.Note), MaxNote)
	case len(s.Models) > MaxModels:
		return invalid("it names %d models; at most %d", len(s.Models), MaxModels)
	case len(s.Rate) > MaxLimits || len(s.Tokens) > MaxLimits || len(s.Spend) > MaxLimits:
		return invalid("at most %d rate, %d tokens and %d spend limits", MaxLimits, MaxLimits, MaxLimits)
	case !s.Expires.IsZero() && !s.Expires.After(now):
		return invalid("it would expire at %s, which has passed", s.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// tokenPrefix starts every issued token: the sk- shape the gateway's masks
// (and secret scanners) recognise, and "llmgw" to say whose it is.
const tokenPrefix = "sk-llmgw-"

// newToken makes a token: 256 random bits.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// view is the record as the admin API shows it, with its use.
func (r *record) view(use Use, now time.Time) Key {
	k := Key{Spec: r.Spec, Created: r.Created, Updated: r.Updated, Rotated: r.Rotated, Use: use}
	for _, o := range r.Old {
		if o.Until.After(now) && o.Until.After(k.OldUntil) {
			k.OldUntil = o.Until
		}
	}
	return k
}

// pruned is the record without the replaced tokens whose overlap is over.
func (r record) pruned(now time.Time) record {
	var keep []oldToken
	for _, o := range r.Old {
		if o.Until.After(now) {
			keep = append(keep, o)
		}
	}
	r.Old = keep
	return r
}

// wellFormed reports whether a record read from the store has hashes of
// the size this package writes.
func (r *record) wellFormed() bool {
	ok := len(r.Hash) == sha256.Size
	for _, o := range r.Old {
		ok = ok && len(o.Hash) == sha256.Size
	}
	return ok
}
