package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// canned is the answer both engines know: 60 words.
var canned = func() []string {
	w := make([]string, 60)
	for i := range w {
		w[i] = fmt.Sprintf("word%02d ", i+1)
	}
	return w
}()

func cannedText() string { return strings.Join(canned, "") }

func streamWords(w http.ResponseWriter, id string, created int, model string, words []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, `data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n", id, created, model)
	for _, word := range words {
		fmt.Fprintf(w, `data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", id, created, model, word)
		w.(http.Flusher).Flush()
	}
}

// primaryThatBreaks streams 40 of the 60 words, then cuts (or stalls).
func primaryThatBreaks(stall bool, toolCalls bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if toolCalls {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"p1","object":"chat.completion.chunk","created":111,"model":"primary-model","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		} else {
			streamWords(w, "p1", 111, "primary-model", canned[:40])
		}
		if stall {
			<-r.Context().Done()
			return
		}
		panic(http.ErrAbortHandler)
	}
}

// continuing continues exactly the remainder of the canned text after the
// assistant message placed last; with reject it refuses such requests.
func continuing(t *testing.T, reject bool) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "assistant" && reject {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"assistant prefill is not supported","type":"invalid_request_error"}}`)
			return
		}
		if last.Role != "assistant" || !strings.HasPrefix(cannedText(), last.Content) {
			http.Error(w, "not a prefix", 400)
			return
		}
		rest := strings.TrimPrefix(cannedText(), last.Content)
		var words []string
		for _, f := range strings.SplitAfter(rest, " ") {
			if f != "" {
				words = append(words, f)
			}
		}
		streamWords(w, "fb-9", 999, "backup-model", words)
		io.WriteString(w, `data: {"id":"fb-9","object":"chat.completion.chunk","created":999,"model":"backup-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
}

func resumeGateway(t *testing.T, primary http.HandlerFunc, fb *recorder, prefill string) {
	up := newRecorder(t, primary)
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			fallback backup
			resume on
			stream_idle_timeout 300ms
		}
		engine backup {
			to %s
			models backup
			prefill %s
		}`, up.URL, fb.URL, prefill))
}

type chunkSeen struct {
	id, model string
	created   int64
}

func streamAll(t *testing.T) (string, []chunkSeen, error) {
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("big", "count to 60"))
	var text strings.Builder
	var seen []chunkSeen
	for stream.Next() {
		c := stream.Current()
		seen = append(seen, chunkSeen{c.ID, c.Model, c.Created})
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String(), seen, stream.Err()
}

func TestCutAndStalledStreamsAreResumedOnTheFallback(t *testing.T) {
	for _, stall := range []bool{false, true} {
		t.Run(fmt.Sprintf("stall=%v", stall), func(t *testing.T) {
			fb := continuing(t, false)
			resumeGateway(t, primaryThatBreaks(stall, false), fb, "on")
			text, seen, err := streamAll(t)
			if err != nil {
				t.Fatal(err)
			}
			if text != cannedText() {
				t.Fatalf("the client got\n%q\nwant\n%q", text, cannedText())
			}
			for _, c := range seen {
				if c.id != "p1" || c.created != 111 {
					t.Fatalf("a chunk with id %q created %d: the stream must read as one", c.id, c.created)
				}
			}
			if last := seen[len(seen)-1]; last.model != "backup-model" {
				t.Fatalf("the resumed chunks say model %q, want the fallback's", last.model)
			}
			if n := len(fb.all()); n != 1 {
				t.Fatalf("the fallback saw %d requests", n)
			}
		})
	}
}

func TestResumeSeamIsOneComment(t *testing.T) {
	resumeGateway(t, primaryThatBreaks(false, false), continuing(t, false), "on")
	resp, err := testClient.Post(gwURL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"big","stream":true,"messages":[{"role":"user","content":"count"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var comments []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ":") {
			comments = append(comments, sc.Text())
		}
	}
	if len(comments) != 1 || comments[0] != ": resumed on backup" {
		t.Fatalf("comments %q", comments)
	}
}

func TestFailedResumeGivesTheOriginalCutError(t *testing.T) {
	cases := map[string]struct {
		fbReject bool
		prefill  string
		toolCall bool
		fbCalls  int
	}{
		"fallback rejects prefill": {fbReject: true, prefill: "on", fbCalls: 1},
		"fallback without prefill": {prefill: "off", fbCalls: 0},
		"tool-call stream":         {prefill: "on", toolCall: true, fbCalls: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fb := continuing(t, c.fbReject)
			resumeGateway(t, primaryThatBreaks(false, c.toolCall), fb, c.prefill)
			_, _, err := streamAll(t)
			if err == nil || !strings.Contains(err.Error(), "engine primary cut the stream") ||
				strings.Contains(err.Error(), "prefill is not supported") {
				t.Fatalf("want the original cut error, got %v", err)
			}
			if n := len(fb.all()); n != c.fbCalls {
				t.Fatalf("the fallback saw %d requests, want %d", n, c.fbCalls)
			}
		})
	}
}
