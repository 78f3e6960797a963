package keys

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// issuedTokens is a keys.Issued of fixed tokens: what the keystore package
// answers, without a store.
type issuedTokens map[string]*Rules

func (m issuedTokens) Find(token string) (*Rules, error) {
	if token == "expired-token-0123456789" {
		return nil, &ExpiredError{Name: "old", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	return m[token], nil
}

func (m issuedTokens) All() []*Rules {
	var out []*Rules
	for _, kr := range m {
		out = append(out, kr)
	}
	return out
}

const issuedToken = "sk-llmgw-issued-0123456789"

// The door's "who" row by row: a key of the config, an issued key, an
// expired one, another token, none; open only without keys of either kind.
func TestWhoIsAskingRowByRow(t *testing.T) {
	t.Parallel()
	alice := NewRules(config.Key{Name: "alice", Models: []string{"small"}})
	withBoth := &Who{Ring: ring(), Issued: issuedTokens{issuedToken: alice}}
	issuedOnly := &Who{Issued: issuedTokens{issuedToken: alice}}
	open := &Who{}
	for _, tc := range []struct {
		name   string
		who    *Who
		header []string
		rules  string // the rules' name, "-" for none
		status int
		says   string
	}{
		{"a key of the config", withBoth, []string{"Authorization", "Bearer " + teamToken}, "team", 0, ""},
		{"an issued key", withBoth, []string{"Authorization", "Bearer " + issuedToken}, "alice", 0, ""},
		{"an issued key as x-api-key", withBoth, []string{"X-Api-Key", issuedToken}, "alice", 0, ""},
		{"an issued key, no key of the config", issuedOnly, []string{"Authorization", "Bearer " + issuedToken}, "alice", 0, ""},
		{"an expired key", withBoth, []string{"Authorization", "Bearer expired-token-0123456789"}, "-", 401, "gateway key old expired at 2026-01-01T00:00:00Z"},
		{"another token", withBoth, []string{"Authorization", "Bearer sk-llmgw-not-issued-012345"}, "-", 401, "missing or invalid gateway key"},
		{"no token", withBoth, nil, "-", 401, "missing or invalid gateway key"},
		{"no token where only issued keys are taken", issuedOnly, nil, "-", 401, "missing or invalid gateway key"},
		{"no token on an open gateway", open, nil, "-", 0, ""},
		{"any token on an open gateway", open, []string{"Authorization", "Bearer whatever"}, "-", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kr, gerr := tc.who.Check(request(tc.header...))
			name := "-"
			if kr != nil {
				name = kr.Name
			}
			status := 0
			if gerr != nil {
				status = gerr.Status
				if gerr.Code != "invalid_api_key" || !strings.Contains(gerr.Message, tc.says) {
					t.Fatalf("%+v", gerr)
				}
			}
			if name != tc.rules || status != tc.status {
				t.Fatalf("rules %s status %d, want %s %d", name, status, tc.rules, tc.status)
			}
			if status == http.StatusUnauthorized && strings.Contains(gerr.Message, "expired-token") {
				t.Fatal("the refusal names the token")
			}
		})
	}
	if got := strings.Join(withBoth.Names(), " "); got != "team alice" {
		t.Fatalf("names %q", got)
	}
}
