package handler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Slots save across keys: a session is its key's own. The engine
// is a fake llama-server (httptest) that records the slot each completion
// is pinned to and each slot save and restore; the gateway runs a dummy
// process for it, so that a stop saves the slots and the next request
// restores them, as with a real one.

const (
	aliceKey = "alice-key-0123456789"
	bobKey   = "bob-key-0123456789ab"
)

// slotServer is the fake llama-server: it answers completions, and keeps
// saved slots by file name.
type slotServer struct {
	*httptest.Server
	mu       sync.Mutex
	pinned   []int           // id_slot of each completion, in order
	saved    map[string]bool // files written
	restored []string        // files read, in order
}

func newSlotServer(t *testing.T) *slotServer {
	s := &slotServer{saved: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/chat/completions":
			var v struct {
				IDSlot *int `json:"id_slot"`
			}
			_ = json.Unmarshal(b, &v)
			id := -1
			if v.IDSlot != nil {
				id = *v.IDSlot
			}
			s.pinned = append(s.pinned, id)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"l","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`)
		case strings.HasPrefix(r.URL.Path, "/slots/"):
			var v struct{ Filename string }
			_ = json.Unmarshal(b, &v)
			switch r.URL.Query().Get("action") {
			case "save":
				s.saved[v.Filename] = true
				io.WriteString(w, `{"n_saved":100}`)
			case "restore":
				s.restored = append(s.restored, v.Filename)
				if !s.saved[v.Filename] {
					http.Error(w, `{"error":"no such file"}`, http.StatusBadRequest)
					return
				}
				io.WriteString(w, `{"n_restored":100}`)
			}
		default:
			io.WriteString(w, `{}`) // health
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slotServer) seen() (pinned []int, saved map[string]bool, restored []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	saved = map[string]bool{}
	for f := range s.saved {
		saved[f] = true
	}
	return append([]int(nil), s.pinned...), saved, append([]string(nil), s.restored...)
}

// slotGateway serves engine l, two slots saved, for alice's and bob's keys
// and a key without a name; stop stops l (its slots are saved).
func slotGateway(t *testing.T) (url string, up *slotServer, stop func()) {
	t.Helper()
	up = newSlotServer(t)
	ec := engines.Config{Name: "l", Cmd: []string{"sleep", "600"}, To: up.URL, Models: []string{"l"},
		Slots: &engines.SlotsConfig{Dir: t.TempDir(), Parallel: 2}}
	cfg := config.Config{
		Keys:    []config.Key{{Name: "alice", Value: aliceKey}, {Name: "bob", Value: bobKey}},
		Engines: []engines.Config{ec.WithDefaults()},
	}
	g, url := testGateway(t, cfg, nil)
	e := g.byModel["l"].eng
	return url, up, func() {
		t.Helper()
		if err := e.Stop(context.Background(), true, engines.StopAdmin); err != nil {
			t.Fatal(err)
		}
	}
}

func chatAs(t *testing.T, url, key, body string, header ...string) {
	t.Helper()
	if st, out := call(t, url, key, http.MethodPost, "/v1/chat/completions", body, header...); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
}

func TestAnotherKeysSessionNeverRestoresThisKeysSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		body   string
	}{
		{"X-Session-Id", []string{"X-Session-Id", "s1"}, `{"model":"l","messages":[{"role":"user","content":"hi"}]}`},
		{"prompt_cache_key", nil, `{"model":"l","prompt_cache_key":"s1","messages":[{"role":"user","content":"hi"}]}`},
		{"prompt prefix", nil, strings.Replace(conversation(7, 3), `"auto"`, `"l"`, 1)}, // the session its blocks name
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, up, stop := slotGateway(t)
			chatAs(t, url, aliceKey, tc.body, tc.header...)
			// bob's same session is another session: the other slot, not alice's cache
			chatAs(t, url, bobKey, tc.body, tc.header...)
			if pinned, _, _ := up.seen(); len(pinned) != 2 || pinned[0] < 0 || pinned[1] < 0 || pinned[0] == pinned[1] {
				t.Fatalf("alice's and bob's turns were pinned to slots %v: bob's took alice's", pinned)
			}
			stop() // both slots saved, each to its key's own file
			_, saved, _ := up.seen()
			if len(saved) != 2 {
				t.Fatalf("saved %v: one file for both keys' sessions", saved)
			}
			chatAs(t, url, bobKey, tc.body, tc.header...)
			_, _, restored := up.seen()
			if len(restored) != 1 {
				t.Fatalf("bob's resumed session restored %v", restored)
			}
			chatAs(t, url, aliceKey, tc.body, tc.header...)
			_, _, restored = up.seen()
			if len(restored) != 2 || restored[0] == restored[1] {
				t.Fatalf("bob's and alice's resumed sessions restored %v: the same file", restored)
			}
		})
	}
}
