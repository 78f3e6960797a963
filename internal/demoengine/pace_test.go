package demoengine

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A JSON answer takes as long as its stream would: 10 words, 2 a chunk,
// 40ms apart, is 5 chunks, 200ms at least; turned off, it comes at once.
func TestAJSONAnswerTakesAsLongAsItsStream(t *testing.T) {
	ask := func(pace bool) time.Duration {
		s := &server{o: Options{Model: "m", Reply: "one two three four five six seven eight nine ten",
			WordsPerChunk: 2, ChunkDelay: 40 * time.Millisecond, PaceAnswers: pace}}
		srv := httptest.NewServer(s.routes())
		defer srv.Close()
		start := time.Now()
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	if d := ask(true); d < 200*time.Millisecond {
		t.Fatalf("a paced answer of 5 chunks 40ms apart came after %v", d)
	}
	ask(false) // no lower bound to prove: it must only answer
}
