package statuspage

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/keystore"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// issuingSource is a gateway that issues keys: its calls are recorded,
// and every issue or rotation answers the same token.
type issuingSource struct {
	fakeSource
	issued []keystore.Key
	calls  []string
}

const pageToken = "sk-llmgw-the-page-token-0123456789"

func (f *issuingSource) IssuedKeys() ([]keystore.Key, bool) { return f.issued, true }

func (f *issuingSource) IssueKey(body []byte) (keystore.Key, string, error) {
	var spec keystore.Spec
	if err := json.Unmarshal(body, &spec); err != nil || spec.Name == "" {
		return keystore.Key{}, "", errors.New("no name")
	}
	f.calls = append(f.calls, "issue "+string(body))
	k := keystore.Key{Spec: spec, Created: time.UnixMilli(1000)}
	f.issued = append(f.issued, k)
	return k, pageToken, nil
}

func (f *issuingSource) UpdateKey(name string, body []byte) (keystore.Key, error) {
	f.calls = append(f.calls, "update "+name+" "+string(body))
	return keystore.Key{Spec: keystore.Spec{Key: config.Key{Name: name}}}, nil
}

func (f *issuingSource) RotateKey(name string, body []byte) (keystore.Key, string, error) {
	f.calls = append(f.calls, "rotate "+name+" "+string(body))
	return keystore.Key{Spec: keystore.Spec{Key: config.Key{Name: name}}}, pageToken, nil
}

func (f *issuingSource) RevokeKey(name string) error {
	f.calls = append(f.calls, "revoke "+name)
	return notFound{name}
}

func pageCall(t *testing.T, url, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The page's key calls reach the issuer with the operator's body; a token
// is in an issue's or a rotation's answer only, never in the state.
func TestThePageIssuesChangesRotatesAndRevokesKeys(t *testing.T) {
	src := &issuingSource{}
	src.keys = []quota.KeyUsage{{Key: "user:alice", Limits: []quota.LimitUsage{}}}
	ts, _ := newTestServer(t, src, nil)
	st, body := pageCall(t, ts.URL, "POST", "/llm/api/keys", `{"name":"dev","models":["m"],"note":"laptop"}`)
	if st != 201 || !strings.Contains(body, pageToken) || !strings.Contains(body, `"note":"laptop"`) {
		t.Fatalf("issue: %d %s", st, body)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"PATCH", "/llm/api/keys/dev", `{"rate":["5/m"]}`, `update dev {"rate":["5/m"]}`},
		{"POST", "/llm/api/keys/dev/rotate", `{"overlap":"1h"}`, `rotate dev {"overlap":"1h"}`},
		{"DELETE", "/llm/api/keys/dev", ``, `revoke dev`},
	} {
		st, body := pageCall(t, ts.URL, c.method, c.path, c.body)
		if src.calls[len(src.calls)-1] != c.want {
			t.Fatalf("%s %s: %d %s, calls %v", c.method, c.path, st, body, src.calls)
		}
	}
	if st, body := pageCall(t, ts.URL, "DELETE", "/llm/api/keys/dev", ""); st != 404 || !strings.Contains(body, "no key named") {
		t.Fatalf("an issuer's error keeps its status: %d %s", st, body)
	}
	_, state := pageCall(t, ts.URL, "GET", "/llm/api/state", "")
	var snap snapshot
	if err := json.Unmarshal([]byte(state), &snap); err != nil {
		t.Fatal(err)
	}
	if !snap.Issuing || len(snap.Keys) != 2 || strings.Contains(state, pageToken) {
		t.Fatalf("state: %s", state)
	}
	dev, alice := snap.Keys[0], snap.Keys[1] // by name
	if dev.Source != "issued" || alice.Source != "identity" || dev.Issued == nil || dev.Issued.Note != "laptop" || alice.Issued != nil {
		t.Fatalf("keys: %+v", snap.Keys)
	}

	// a gateway that issues no keys says so
	plain, _ := newTestServer(t, &fakeSource{}, nil)
	if st, _ := pageCall(t, plain.URL, "POST", "/llm/api/keys", `{"name":"dev"}`); st != 404 {
		t.Fatalf("issuing without issued keys: %d", st)
	}
	if st, _ := pageCall(t, plain.URL, "POST", "/llm/api/keys/team-a/reset", ``); st != 404 {
		t.Fatalf("a reset of no key: %d", st)
	}
}
