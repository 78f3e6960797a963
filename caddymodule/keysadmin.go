package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/keystore"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// The admin API's keys, and the status page's (which calls the same
// functions):
//
//	GET    /llm_gateway/keys               every named key with limits and every issued key: usage per limit, and an issued key's rules, note, expiry and use; never a token
//	POST   /llm_gateway/keys               issue a key: its name and rules in the body; the answer holds its token, this once
//	GET    /llm_gateway/keys/<name>        one key
//	PATCH  /llm_gateway/keys/<name>        change an issued key's rules, note or expiry: the members sent replace its own
//	POST   /llm_gateway/keys/<name>/rotate a new token, this once; {"overlap": "1h"} keeps the old one that long
//	DELETE /llm_gateway/keys/<name>        revoke an issued key, at once
//	POST   /llm_gateway/keys/<name>/reset  clear a key's counters
//
// A change is logged (key created, updated, rotated, revoked: its name,
// never a token) and emitted as a Caddy event (llm_gateway.key_created, …).

// maxKeyBody bounds the body of a key's call.
const maxKeyBody = 64 << 10

func serveKeysAdmin(w http.ResponseWriter, r *http.Request, parts []string) error {
	all := len(parts) == 0 || parts[0] == ""
	switch {
	case all && r.Method == http.MethodGet:
		return writeAdminJSON(w, keyListings())
	case all && r.Method == http.MethodPost:
		body, err := readKeyBody(r)
		if err != nil {
			return err
		}
		issued, err := issueKey(body)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		return writeAdminJSONStatus(w, http.StatusCreated, issued)
	case len(parts) == 1 && r.Method == http.MethodGet:
		l, ok := keyListing(parts[0])
		if !ok {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key named %q", parts[0])}
		}
		return writeAdminJSON(w, l)
	case len(parts) == 1 && r.Method == http.MethodPatch:
		body, err := readKeyBody(r)
		if err != nil {
			return err
		}
		k, err := updateKey(parts[0], body)
		if err != nil {
			return err
		}
		return writeAdminJSON(w, k)
	case len(parts) == 1 && r.Method == http.MethodDelete:
		if err := revokeKey(parts[0]); err != nil {
			return err
		}
		return writeAdminJSON(w, map[string]string{"revoked": parts[0]})
	case len(parts) == 2 && parts[1] == "rotate" && r.Method == http.MethodPost:
		body, err := readKeyBody(r)
		if err != nil {
			return err
		}
		rotated, err := rotateKey(parts[0], body)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		return writeAdminJSON(w, rotated)
	case len(parts) == 2 && parts[1] == "reset" && r.Method == http.MethodPost:
		if err := resetKey(parts[0]); err != nil {
			return err
		}
		return writeAdminJSON(w, map[string]string{"reset": parts[0]})
	}
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
}

func readKeyBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxKeyBody+1))
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("reading the body: %v", err)}
	}
	if len(b) > maxKeyBody {
		return nil, caddy.APIError{HTTPStatus: http.StatusRequestEntityTooLarge, Err: fmt.Errorf("a key's body is at most %d bytes", maxKeyBody)}
	}
	return b, nil
}

// KeyListing is one key of GET /llm_gateway/keys: its counters (key and
// limits, as for every named key with limits), where it comes from
// (config: a key of the Caddyfile; issued: issued at run time; identity:
// an identity with limits that asked; team: a team's shared limits, as
// team:<name>) and, for an issued key, its rules,
// note, expiry and use.
type KeyListing struct {
	quota.KeyUsage
	Source string `json:"source"`
	*keystore.Key
}

// IssuedKey is the answer of an issue or a rotation: the key, and its
// token, shown this once.
type IssuedKey struct {
	keystore.Key
	Token string `json:"token"`
}

// keyListings are the live configs' named keys and identities with limits
// and the newest store's issued keys, by name. An issued key the config's
// own key of its name shadows is listed apart, to be seen and revoked.
func keyListings() []KeyListing {
	out := []KeyListing{}
	at := map[string]int{}
	for _, u := range liveKeyUsage() {
		source := "config"
		switch {
		case strings.HasPrefix(u.Key, hconfig.IdentityPrefix):
			source = "identity"
		case strings.HasPrefix(u.Key, hconfig.TeamPrefix):
			source = "team" // budget.go: a team's shared limits
		}
		at[u.Key] = len(out)
		out = append(out, KeyListing{KeyUsage: u, Source: source})
	}
	if h, ok := newestIssued(); ok {
		for _, k := range h.store.List() {
			if i, ok := at[k.Name]; ok && !configKeyNamed(k.Name) {
				out[i].Source, out[i].Key = "issued", &k
				continue
			}
			out = append(out, KeyListing{KeyUsage: quota.KeyUsage{Key: k.Name, Limits: []quota.LimitUsage{}}, Source: "issued", Key: &k})
		}
	}
	slices.SortStableFunc(out, func(a, b KeyListing) int { return strings.Compare(a.KeyUsage.Key, b.KeyUsage.Key) })
	return out
}

func keyListing(name string) (KeyListing, bool) {
	for _, l := range keyListings() {
		if l.KeyUsage.Key == name {
			return l, true
		}
	}
	return KeyListing{}, false
}

// keyRequest is the body of an issue or an update: a key's name and rules
// (a Caddyfile key's, config.Key's JSON), a note, an expiry as a time
// (expires) or from now (expires_in: 720h, 30d; "never" removes it).
type keyRequest struct {
	*keystore.Spec
	ExpiresIn string `json:"expires_in,omitempty"`
}

// decodeInto reads a key's body onto spec: the members it sends replace
// spec's, others stay. An unknown member is refused, as a typo would be.
func decodeInto(body []byte, spec *keystore.Spec, now time.Time) error {
	req := keyRequest{Spec: spec}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return keystore.Errorf(keystore.ErrInvalid, "the body is a key's JSON object (name, models, rate, tokens, over_budget_fallback, reserve, priority, no_hedge, note, expires or expires_in): %v", err)
	}
	switch req.ExpiresIn {
	case "":
	case "never":
		spec.Expires = time.Time{}
	default:
		d, err := caddy.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return keystore.Errorf(keystore.ErrInvalid, "expires_in takes a duration such as 720h or 30d, or never, not %q", req.ExpiresIn)
		}
		spec.Expires = now.Add(d).UTC().Truncate(time.Second)
	}
	return nil
}

// checkRules checks an issued key's rules against what the live gateways
// serve, and its name against their own keys'.
func checkRules(spec keystore.Spec, issuing bool) error {
	gws := newestGateways()
	known := func(m string) bool {
		return slices.ContainsFunc(gws, func(g *handler.Gateway) bool { return g.Knows(m) })
	}
	if err := hconfig.CheckRules(spec.Key, "key "+spec.Name, known); err != nil {
		return keystore.Errorf(keystore.ErrInvalid, "%v", err)
	}
	if tm := spec.Key.Team; tm != "" && !slices.ContainsFunc(gws, func(g *handler.Gateway) bool { return g.HasTeam(tm) }) {
		return keystore.Errorf(keystore.ErrInvalid, "key %s: team %s is no team of this gateway (team %s { spend 100/mo })", spec.Name, tm, tm)
	}
	if issuing && configKeyNamed(spec.Name) {
		return keystore.Errorf(keystore.ErrExists, "key %s is a key of the config: give the issued key another name", spec.Name)
	}
	return nil
}

// configKeyNamed reports whether a live config has a key of that name.
func configKeyNamed(name string) bool {
	for _, g := range newestGateways() {
		if slices.Contains(g.KeyNames(), name) {
			return true
		}
	}
	return false
}

// issuing is the newest store, or the admin API's error when no live
// config takes issued keys.
func issuing() (issuedHandle, error) {
	h, ok := newestIssued()
	if !ok {
		return h, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("no live config takes issued keys: add issued_keys to the llm_gateway block")}
	}
	return h, nil
}

func issueKey(body []byte) (IssuedKey, error) {
	h, err := issuing()
	if err != nil {
		return IssuedKey{}, err
	}
	var spec keystore.Spec
	if err := decodeInto(body, &spec, time.Now()); err != nil {
		return IssuedKey{}, keyAPIError(err)
	}
	if err := checkRules(spec, true); err != nil {
		return IssuedKey{}, keyAPIError(err)
	}
	k, token, err := h.store.Issue(spec)
	if err != nil {
		return IssuedKey{}, keyAPIError(err)
	}
	keyEvent(h, "created", k)
	return IssuedKey{Key: k, Token: token}, nil
}

func updateKey(name string, body []byte) (keystore.Key, error) {
	h, err := issuing()
	if err != nil {
		return keystore.Key{}, err
	}
	if err := notTheConfigs(name); err != nil {
		return keystore.Key{}, err
	}
	k, err := h.store.Update(name, func(spec *keystore.Spec) error {
		if err := decodeInto(body, spec, time.Now()); err != nil {
			return err
		}
		if spec.Name != name {
			return keystore.Errorf(keystore.ErrInvalid, "a key's name stays (revoke it and issue another)")
		}
		return checkRules(*spec, false)
	})
	if err != nil {
		return keystore.Key{}, keyAPIError(err)
	}
	keyEvent(h, "updated", k)
	return k, nil
}

// rotateRequest is the body of a rotation: how long the old token is
// still accepted. Default: not at all.
type rotateRequest struct {
	Overlap caddy.Duration `json:"overlap,omitempty"`
}

func rotateKey(name string, body []byte) (IssuedKey, error) {
	h, err := issuing()
	if err != nil {
		return IssuedKey{}, err
	}
	if err := notTheConfigs(name); err != nil {
		return IssuedKey{}, err
	}
	var req rotateRequest
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return IssuedKey{}, keyAPIError(keystore.Errorf(keystore.ErrInvalid, "a rotation's body is {\"overlap\": \"1h\"} or nothing: %v", err))
		}
	}
	k, token, err := h.store.Rotate(name, time.Duration(req.Overlap))
	if err != nil {
		return IssuedKey{}, keyAPIError(err)
	}
	keyEvent(h, "rotated", k)
	return IssuedKey{Key: k, Token: token}, nil
}

func revokeKey(name string) error {
	h, err := issuing()
	if err != nil {
		return err
	}
	if err := notTheConfigs(name); err != nil {
		return err
	}
	k, _ := h.store.Get(name)
	if err := h.store.Revoke(name); err != nil {
		return keyAPIError(err)
	}
	keyEvent(h, "revoked", k)
	return nil
}

// notTheConfigs refuses to change a key of the config through the API.
func notTheConfigs(name string) error {
	if configKeyNamed(name) {
		return caddy.APIError{HTTPStatus: http.StatusConflict, Err: fmt.Errorf("key %s is a key of the config: change it in the Caddyfile", name)}
	}
	return nil
}

// keyAPIError gives a store's error its status.
func keyAPIError(err error) error {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, keystore.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, keystore.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, keystore.ErrExists), errors.Is(err, keystore.ErrFull):
		status = http.StatusConflict
	case errors.Is(err, keystore.ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	return caddy.APIError{HTTPStatus: status, Err: err}
}

// keyEvent logs a change of an issued key and emits it as a Caddy event:
// its name and what changed, never a token.
func keyEvent(h issuedHandle, what string, k keystore.Key) {
	fields := []zap.Field{zap.String("key", k.Name)}
	if what != "revoked" {
		fields = append(fields, zap.Strings("models", k.Models), zap.Time("expires", k.Expires))
	}
	if what == "rotated" && !k.OldUntil.IsZero() {
		fields = append(fields, zap.Time("old_token_until", k.OldUntil))
	}
	h.log.Info("key "+what, fields...)
	emit("llm_gateway.key_"+what, map[string]any{"key": k.Name})
}

// The status page's keys: the admin API's calls, their errors with their
// status (asPageError).

func (liveSource) IssuedKeys() ([]keystore.Key, bool) {
	h, ok := newestIssued()
	if !ok {
		return nil, false
	}
	return h.store.List(), true
}

func (liveSource) IssueKey(body []byte) (keystore.Key, string, error) {
	k, err := issueKey(body)
	return k.Key, k.Token, asPageError(err)
}

func (liveSource) UpdateKey(name string, body []byte) (keystore.Key, error) {
	k, err := updateKey(name, body)
	return k, asPageError(err)
}

func (liveSource) RotateKey(name string, body []byte) (keystore.Key, string, error) {
	k, err := rotateKey(name, body)
	return k.Key, k.Token, asPageError(err)
}

func (liveSource) RevokeKey(name string) error { return asPageError(revokeKey(name)) }

// Interface guards
var _ statuspage.KeyIssuer = liveSource{}
