package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// An engine whose first token takes 20 s, hedged after 300ms to a fallback
// that answers at once: a client of the OpenAI SDK gets the fallback's
// answer, streamed and whole, long before the slow engine would have
// said anything, and the slow attempt is cancelled (a loser is observed).
func TestASlowFirstTokenIsHedgedToTheFallback(t *testing.T) {
	startGateway(t, `
		engine slow {
			`+engineCmd("--first-token-delay 20s")+`
			models m
			fallback fast
			hedge_after 300ms
			hedge_budget 100%
		}
		engine fast {
			`+engineCmd(`--reply "from the fast one"`)+`
			models fast
			preload
		}`)
	awaitState(t, "fast", "ready")
	before := scrape(t)
	client := sdk("unused")
	for i, stream := range []bool{true, false, true} {
		start := time.Now()
		var text string
		if stream {
			s := client.Chat.Completions.NewStreaming(context.Background(), chatParams("m", "hi"))
			var err error
			if text, err = readStream(s); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		} else {
			c, err := client.Chat.Completions.New(context.Background(), chatParams("m", "hi"))
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			text = c.Choices[0].Message.Content
		}
		if took := time.Since(start); took >= 20*time.Second {
			t.Fatalf("request %d took %s: it waited for the slow engine", i, took)
		}
		if !strings.Contains(text, "from the fast one") {
			t.Fatalf("request %d: %q", i, text)
		}
	}
	after := scrape(t)
	won := sample(t, after, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`) -
		sample(t, before, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`)
	if won != 3 {
		t.Fatalf("hedges won %v, want 3\n%s", won, grepLines(after, "hedge"))
	}
	if !strings.Contains(after, `llm_gateway_hedge_loser_seconds_count{engine="slow"}`) {
		t.Fatalf("no loser observed:\n%s", grepLines(after, "hedge"))
	}
}

// The same slow first token from a Chat-only engine, to a Responses
// client (Codex's API) and a Chat one: each is hedged at hedge_after to
// the fallback and streamed its answer, the Responses one as the openai-go
// SDK reads a Responses stream (and the Node SDK's helper, where it is
// installed) (issue 56: the translated stream said
// response.created on the engine's role-only chunk, which committed it,
// and 179 of 179 such streams waited the whole delay).
func TestAResponsesClientIsHedgedAsAChatOne(t *testing.T) {
	startGateway(t, `
		engine slow {
			`+engineCmd("--first-token-delay 20s")+`
			models m
			api chat
			fallback fast
			hedge_after 300ms
			hedge_budget 100%
		}
		engine fast {
			`+engineCmd(`--reply "from the fast one"`)+`
			models fast
			api chat
			preload
		}`)
	awaitState(t, "fast", "ready")
	before := scrape(t)
	client := sdk("unused")
	for _, which := range []string{"responses", "chat"} {
		start := time.Now()
		var text string
		var err error
		if which == "chat" {
			text, err = readStream(client.Chat.Completions.NewStreaming(context.Background(), chatParams("m", "hi")))
		} else {
			text, err = readResponsesStream(client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
				Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}))
		}
		if err != nil {
			t.Fatalf("%s: %v", which, err)
		}
		if took := time.Since(start); took >= 20*time.Second || !strings.Contains(text, "from the fast one") {
			t.Fatalf("%s: %q after %s: not the hedge's answer", which, text, took)
		}
	}
	want := 2.0
	if nodeSDK(t) != "" {
		// and the Node SDK's Responses helper, where it is installed
		want++
		start := time.Now()
		var end nodeLine
		for l := range nodeResponses(t, gwURL+"/v1", "m") {
			if l.End != "" {
				end = l
			}
		}
		if took := time.Since(start); took >= 20*time.Second || end.End != "final" || end.Status != "completed" || !strings.Contains(end.Text, "from the fast one") {
			t.Fatalf("the Node SDK: %+v after %s: not the hedge's answer", end, took)
		}
	}
	after := scrape(t)
	won := sample(t, after, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`) -
		sample(t, before, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`)
	if won != want {
		t.Fatalf("hedges won %v, want %v (one per client)\n%s", won, want, grepLines(after, "hedge"))
	}
}

// readResponsesStream reads a Responses stream as its SDK gives it: the
// text of its deltas, which must be the text of response.completed.
func readResponsesStream(s *ssestream.Stream[responses.ResponseStreamEventUnion]) (string, error) {
	var text strings.Builder
	completed := ""
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = ev.Response.OutputText()
		}
	}
	if s.Err() == nil && completed != text.String() {
		return text.String(), fmt.Errorf("deltas %q, response.completed %q", text.String(), completed)
	}
	return text.String(), s.Err()
}

// A hedge's loser costs the caller's key its prompt (four bytes a token:
// it was cancelled before any content), beside the winner's reported usage.
func TestAHedgesLoserIsChargedItsPrompt(t *testing.T) {
	const key = "hedge-charge-key-0123456789"
	silent := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fast := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { okChatUsage(w) })
	startGateway(t, `
		key team `+key+` {
			tokens 100k/d
		}
		engine slow {
			to `+silent.URL+`
			models m
			fallback fast
			hedge_after 200ms
		}
		engine fast {
			to `+fast.URL+`
			models fast
		}`)
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/team/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 200) + `"}]}`
	resp, answer := post(t, "/v1/chat/completions", body, "Authorization", "Bearer "+key)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "fast" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, answer)
	}
	// the winner's 11 + 7, and the loser's prompt; the charge is made as
	// the request ends, after the loser returned
	want := 11 + 7 + len(body)/4 + 1
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, keys := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys"))
		if strings.Contains(keys, `"used": `+strconv.Itoa(want)+`,`) || strings.Contains(keys, `"used": `+strconv.Itoa(want)+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want used %d:\n%s", want, keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A slow start is a hedge that needs no budget: while the engine loads,
// every request is answered by the fallback from hedge_after on (with the
// default budget of 10% only one could be, were they counted), and the
// start goes on.
func TestASlowStartIsAHedgeWithoutBudget(t *testing.T) {
	startGateway(t, `
		engine slow {
			`+engineCmd("--load-time 8s")+`
			models m
			fallback fast
			hedge_after 300ms
		}
		engine fast {
			`+engineCmd(`--reply "from the fast one"`)+`
			models fast
			preload
		}`)
	awaitState(t, "fast", "ready")
	client := sdk("unused")
	for i := range 3 {
		c, err := client.Chat.Completions.New(context.Background(), chatParams("m", "hi"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !strings.Contains(c.Choices[0].Message.Content, "from the fast one") {
			t.Fatalf("request %d: %q", i, c.Choices[0].Message.Content)
		}
	}
	awaitState(t, "slow", "ready") // the start went on
	c, err := client.Chat.Completions.New(context.Background(), chatParams("m", "hi"))
	if err != nil || strings.Contains(c.Choices[0].Message.Content, "from the fast one") {
		t.Fatalf("once up, the engine answers: %v %+v", err, c)
	}
}

// A hedged engine's transient failure (a 429 with Retry-After: 1, a single
// 500) is the engine's to answer: its retry after the back-off runs beside
// the fallback, which starts at once, and the client of the OpenAI SDK
// gets the model it asked for, not the fallback's answer that came first.
func TestAHedgedEnginesTransientFailureIsAnsweredByItsRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header string
	}{
		{"429 Retry-After 1", http.StatusTooManyRequests, "1"},
		{"a single 500", http.StatusInternalServerError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			asked := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/chat/completions" && n.Add(1) == 1 {
					if tc.header != "" {
						w.Header().Set("Retry-After", tc.header)
					}
					http.Error(w, `{"error":{"message":"transient"}}`, tc.status)
					return
				}
				answerWith(w, "from the model asked for")
			})
			fallback := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { answerWith(w, "from the fallback") })
			startGateway(t, `
				engine asked {
					to `+asked.URL+`
					models m
					fallback other
					hedge_after 300ms
				}
				engine other {
					to `+fallback.URL+`
					models other
				}`)
			c, err := sdk("unused").Chat.Completions.New(context.Background(), chatParams("m", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Choices[0].Message.Content; got != "from the model asked for" {
				t.Fatalf("answer %q", got)
			}
			if got := n.Load(); got != 2 {
				t.Fatalf("the engine was sent %d requests, want 2 (the retry)", got)
			}
			if got := len(fallback.all()); got != 1 {
				t.Fatalf("the fallback was sent %d requests, want 1 (beside the retry)", got)
			}
		})
	}
}

// answerWith answers a chat completion saying text.
func answerWith(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`+text+`"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
}
