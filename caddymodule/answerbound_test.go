package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// runaway is an engine whose every answer is 5,000 tokens, whatever the
// request's limit, as a model that never stops would be: it speaks Chat
// Completions and Messages, holds each answer until the test lets it go
// (the burst is all in flight at once), and counts what it generated.
type runaway struct {
	*httptest.Server
	arrived   atomic.Int64
	arrivals  chan struct{} // one per request that reached it
	tokens    atomic.Int64
	release   chan struct{}
	closeOnce sync.Once
}

const runawayTokens = 5000

func newRunaway(t *testing.T) *runaway {
	e := &runaway{release: make(chan struct{}), arrivals: make(chan struct{}, 64)}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		var req struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		e.arrived.Add(1)
		e.arrivals <- struct{}{}
		<-e.release
		e.tokens.Add(runawayTokens)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/messages" {
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"…"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":%d}}`, req.Model, runawayTokens)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"…"}}],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d}}`, req.Model, runawayTokens, runawayTokens+10)
	}))
	t.Cleanup(func() { e.let(); e.Close() })
	return e
}

func (e *runaway) let() { e.closeOnce.Do(func() { close(e.release) }) }

// The MEDIUM finding on budgets, through Caddy: 50 concurrent chat
// requests that name no limit, on a 20k/d key, whose answers are 5,000
// tokens. They reserved the key's reserve (1,024) and used 95,095 tokens
// (4.75x); now each reserves what its engine may generate, and the burst
// uses at most 1.2 times the budget: on an engine nothing bounds, one runs
// alone; through translation to Messages (which the gateway sends
// max_tokens 8192) two fit; on an engine that declares max_output_tokens
// 5000, three.
func TestABurstNamingNoLimitKeepsItsBudget(t *testing.T) {
	const key = "burst-key-0123456789abcd"
	const budget = 20000
	for _, c := range []struct {
		name, engine string
		admitted     int64
	}{
		{"nothing bounds the answer", "", 1},
		{"translated to Messages", "api anthropic", 2},
		{"the engine declares its cap", "max_output_tokens 5000", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newRunaway(t)
			startGateway(t, `
		key burst `+key+` {
			tokens 20000/d
		}
		engine x {
			to `+up.URL+`
			models x
			`+c.engine+`
		}`)
			if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/burst/reset")); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			statuses := make(chan int, 50)
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					resp, _ := post(t, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"write on"}]}`, "Authorization", "Bearer "+key)
					statuses <- resp.StatusCode
				})
			}
			// every request is either at the engine or answered (refused):
			// the burst is decided while all of it is in flight
			got := map[int]int{}
			for n := 0; n < 50; n++ {
				select {
				case <-up.arrivals:
				case st := <-statuses:
					got[st]++
				}
			}
			up.let()
			wg.Wait()
			close(statuses)
			for st := range statuses {
				got[st]++
			}
			if got[200] != int(c.admitted) || got[200]+got[http.StatusTooManyRequests] != 50 {
				t.Errorf("statuses %v", got)
			}
			used := up.tokens.Load()
			if up.arrived.Load() != c.admitted || float64(used) > 1.2*budget {
				t.Fatalf("%d requests admitted (want %d), %d tokens generated on a %d budget", up.arrived.Load(), c.admitted, used, budget)
			}
			t.Logf("50 concurrent requests naming no limit, 5,000-token answers: %d admitted, %d tokens of %d", up.arrived.Load(), used, budget)
		})
	}
}
