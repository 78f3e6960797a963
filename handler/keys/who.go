package keys

import (
	"fmt"
	"net/http"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
)

// Who decides who is asking: the door's first step (handler/admission.go).
// A caller is one of
//
//	the request carries          who is asking                     refused
//	an identity Caddy's auth     the identity, "user:<id>", with   403 identity_not_allowed when
//	  set (WithIdentity)           its user's, first group's or      no block applies
//	                               the default block's rules
//	a key of the config          that key (its name, its rules)
//	an issued key's token        that key; past its expiry, none   401, saying it expired
//	another token                nobody                            401 invalid_api_key
//	nothing                      nobody                            401, unless the gateway is open
//
// An identity comes first: another handler authenticated the request, and
// a bearer token beside it may be that handler's (a JWT), not a gateway
// key. The gateway is open (every request is served, with no rules) only
// when it has no key of its own, accepts no issued keys and knows no
// identities.
type Who struct {
	Ring       *Ring       // the config's keys; nil for none
	Issued     Issued      // keys issued at run time; nil when the config takes none
	Identities *Identities // rule blocks of Caddy's identities; nil for none
}

// Issued is where the door finds the keys issued at run time (the keystore
// package, which the caddy module hands to the gateway).
type Issued interface {
	// Find returns the rules of the issued key whose token this is, nil
	// when it is none; a key past its expiry is an *ExpiredError. It
	// hashes the token once and looks the hash up: O(1) in the number of
	// keys, and what it takes does not depend on how close a wrong token
	// is to a right one (the hash is keyed, so a caller cannot aim at one).
	Find(token string) (*Rules, error)
	// All are the rules of every issued key, sorted by name.
	All() []*Rules
}

// ExpiredError is the refusal of an issued key past its expiry.
type ExpiredError struct {
	Name string
	At   time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("gateway key %s expired at %s: ask an operator for a new one", e.Name, e.At.UTC().Format(time.RFC3339))
}

// Check returns the rules of who is asking (nil for nobody, on an open
// gateway) or the refusal.
func (w *Who) Check(r *http.Request) (*Rules, *apierror.Error) {
	if w.Identities != nil {
		if id, ok := identityOf(r); ok {
			return w.Identities.rules(id)
		}
	}
	token := callerToken(r.Header)
	if token != "" {
		if kr, ok := w.Ring.match(token); ok {
			return kr, nil
		}
		if w.Issued != nil {
			kr, err := w.Issued.Find(token)
			if err != nil {
				return nil, unauthorized(err.Error())
			}
			if kr != nil {
				return kr, nil
			}
		}
	}
	switch {
	case w.open():
		return nil, nil
	case w.Identities != nil:
		return nil, unauthorized("missing or invalid gateway key, and no identity authenticated by Caddy: sign in, or send a key as 'Authorization: Bearer <key>'")
	}
	return nil, unauthorized("missing or invalid gateway key: send it as 'Authorization: Bearer <key>'")
}

// open reports whether the gateway serves everyone: no keys of its own,
// none issued.
func (w *Who) open() bool { return w.Ring == nil && w.Issued == nil && w.Identities == nil }

// Names are the names of every named key the door knows: the config's,
// then the issued ones (not the identities: any may ask).
func (w *Who) Names() []string {
	names := w.Ring.Names()
	if w.Issued != nil {
		for _, kr := range w.Issued.All() {
			names = append(names, kr.Name)
		}
	}
	return names
}

func unauthorized(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusUnauthorized, Type: apierror.TypeAuthentication, Code: "invalid_api_key", Message: msg}
}
