package statuspage

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/keystore"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The page's keys: every named key with limits (the config's, the issued
// ones, the identities with limits that asked) with its counters, and for
// an operator the keys issued at run time with their life (note, rules,
// expiry, last use, requests, tokens used), issued, changed, rotated and
// revoked through the admin API's own calls. A token is sent to the page
// once, in the answer to its issue or rotation, which the page shows once;
// never in a snapshot.
//
//	POST   <prefix>/api/keys                 issue a key (the admin API's body)
//	PATCH  <prefix>/api/keys/<name>          change its rules, note or expiry
//	POST   <prefix>/api/keys/<name>/rotate   a new token; {"overlap": "1h"}
//	DELETE <prefix>/api/keys/<name>          revoke it
//	POST   <prefix>/api/keys/<name>/reset    clear a key's counters

// KeyIssuer is a Source that issues keys at run time (the caddy module's,
// over the admin API's calls). Its errors may say which status they
// deserve (StatusError).
type KeyIssuer interface {
	// IssuedKeys are the issued keys, never a token; ok is false when no
	// live config takes issued keys.
	IssuedKeys() (keys []keystore.Key, ok bool)
	IssueKey(body []byte) (keystore.Key, string, error)
	UpdateKey(name string, body []byte) (keystore.Key, error)
	RotateKey(name string, body []byte) (keystore.Key, string, error)
	RevokeKey(name string) error
}

// issuedView is an issued key's life on the page: moments in Unix ms.
type issuedView struct {
	Note       string   `json:"note,omitempty"`
	Models     []string `json:"models,omitempty"`
	Rate       []string `json:"rate,omitempty"`
	Tokens     []string `json:"tokens,omitempty"`
	Priority   int      `json:"priority,omitempty"`
	Expires    int64    `json:"expires,omitempty"`
	Created    int64    `json:"created"`
	Rotated    int64    `json:"rotated,omitempty"`
	OldUntil   int64    `json:"old_token_until,omitempty"`
	LastUsed   int64    `json:"last_used,omitempty"`
	Requests   int64    `json:"requests"`
	TokensUsed int64    `json:"tokens_used"`
}

// keys are the snapshot's keys, and whether keys may be issued here.
func (s *Server) keys() ([]keyView, bool) {
	views := keyViews(s.Source.KeyUsage())
	issuer, ok := s.Source.(KeyIssuer)
	if !ok {
		return views, false
	}
	issued, issuing := issuer.IssuedKeys()
	at := map[string]int{}
	for i, v := range views {
		at[v.Name] = i
		if strings.HasPrefix(v.Name, config.IdentityPrefix) {
			views[i].Source = "identity"
		}
	}
	for _, k := range issued {
		i, ok := at[k.Name]
		if !ok {
			i = len(views)
			views = append(views, keyView{Name: k.Name, Limits: []limitView{}})
		}
		views[i].Source, views[i].Issued = "issued", viewOf(k)
	}
	slices.SortStableFunc(views, func(a, b keyView) int { return strings.Compare(a.Name, b.Name) })
	return views, issuing
}

func viewOf(k keystore.Key) *issuedView {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return &issuedView{
		Note: k.Note, Models: k.Models, Rate: limits(k.Rate), Tokens: limits(k.Tokens), Priority: k.Priority,
		Expires: ms(k.Expires), Created: ms(k.Created), Rotated: ms(k.Rotated), OldUntil: ms(k.OldUntil),
		LastUsed: ms(k.LastUsed), Requests: k.Requests, TokensUsed: k.TokensUsed,
	}
}

func limits(ls []quota.Limit) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.String())
	}
	return out
}

// maxKeyBody bounds the body of a key's call, as the admin API's.
const maxKeyBody = 64 << 10

// serveKeyAction serves the page's calls on keys (parts follow "keys").
func (s *Server) serveKeyAction(w http.ResponseWriter, r *http.Request, parts []string) {
	defer s.Board.Nudge() // the pages show the change at once
	if len(parts) == 2 && parts[1] == "reset" && r.Method == http.MethodPost {
		s.answer(w, s.Source.ResetKey(parts[0]), map[string]string{"key": parts[0], "done": "reset"})
		return
	}
	issuer, ok := s.Source.(KeyIssuer)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this gateway issues no keys")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxKeyBody+1))
	if err != nil || len(body) > maxKeyBody {
		writeError(w, http.StatusRequestEntityTooLarge, "action_failed", fmt.Sprintf("a key's body is at most %d bytes", maxKeyBody))
		return
	}
	type issued struct {
		keystore.Key
		Token string `json:"token"`
	}
	switch {
	case len(parts) == 0 && r.Method == http.MethodPost:
		k, token, err := issuer.IssueKey(body)
		s.answerStatus(w, http.StatusCreated, err, issued{k, token})
	case len(parts) == 1 && r.Method == http.MethodPatch:
		k, err := issuer.UpdateKey(parts[0], body)
		s.answer(w, err, k)
	case len(parts) == 2 && parts[1] == "rotate" && r.Method == http.MethodPost:
		k, token, err := issuer.RotateKey(parts[0], body)
		s.answer(w, err, issued{k, token})
	case len(parts) == 1 && r.Method == http.MethodDelete:
		s.answer(w, issuer.RevokeKey(parts[0]), map[string]string{"key": parts[0], "done": "revoked"})
	default:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %s is not part of the status page's API", r.Method, r.URL.Path))
	}
}

func (s *Server) answer(w http.ResponseWriter, err error, v any) {
	s.answerStatus(w, http.StatusOK, err, v)
}

func (s *Server) answerStatus(w http.ResponseWriter, status int, err error, v any) {
	if err != nil {
		writeError(w, statusOf(err), "action_failed", engines.Mask(err.Error(), nil))
		return
	}
	writeJSON(w, status, v)
}
