package handler

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Ten uploads of 40 MiB at once held 400 MiB of bodies, max_body bounding
// each and nothing all of them (issue 51). Under max_body_in_flight 128MiB,
// three are admitted whole and held while their engine answers, seven are
// 503 bodies_in_flight with Retry-After before a byte of them is read, a
// chat request's small body still passes, and what the gateway allocated
// for the bodies stays within the cap and a little (each admitted body is
// read into one buffer, with no copy to join its chunks: the copy took
// 244 MiB, twice the cap).
func TestBodiesInFlightAreBoundedTogether(t *testing.T) {
	const limit = 128 << 20
	// an engine that reads each body, then holds its answer until released
	held := &heldEngine{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	held.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		held.arrived <- struct{}{}
		<-held.release
		answerOK(w, "held")
	}))
	t.Cleanup(func() { held.free(); held.Close() })
	g, url := testGateway(t, config.Config{
		MaxBody: 48 << 20, MaxBodyInFlight: limit,
		Engines: []engines.Config{{Name: "w", To: held.URL, Models: []string{"whisper", "m"}}},
	}, nil)
	body, ct := multipartBody(t, [][2]string{{"model", "whisper"}}, bytes.Repeat([]byte("a"), 40<<20))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	type reply struct {
		status              int
		retryAfter, message string
	}
	// Expect: 100-continue, as curl sends a large body: the refusal comes
	// before the body is sent, which HTTP/1.1 cannot stop once it is
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}}
	replies := make(chan reply, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/transcriptions", bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Expect", "100-continue")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				replies <- reply{}
				return
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			replies <- reply{resp.StatusCode, resp.Header.Get("Retry-After"), string(out)}
		})
	}
	// each upload is at the engine or answered: all of them in flight at once
	admitted, refused := 0, 0
	for admitted+refused < 10 {
		select {
		case <-held.arrived:
			admitted++
		case r := <-replies:
			if r.status != http.StatusServiceUnavailable || r.retryAfter != "1" || !strings.Contains(r.message, `"code":"bodies_in_flight"`) {
				t.Errorf("a refused upload: %d Retry-After %q %s", r.status, r.retryAfter, r.message)
			}
			refused++
		}
	}
	if admitted != 3 {
		t.Errorf("%d uploads of 40 MiB admitted under a cap of 128 MiB, want 3", admitted)
	}
	// a chat request's body (under 64 KiB) is not held back by uploads
	done := postLater(t, url, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	<-held.arrived
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held.free()
	wg.Wait()
	if a := <-done; a.resp.StatusCode != 200 {
		t.Fatalf("a chat request beside the uploads: %d %s", a.resp.StatusCode, a.body)
	}
	close(replies)
	for r := range replies {
		if r.status != 200 && r.status != http.StatusServiceUnavailable {
			t.Errorf("status %d", r.status)
		}
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > limit+limit/5 {
		t.Errorf("the uploads allocated %d MiB under a cap of %d MiB", got>>20, limit>>20)
	} else {
		t.Logf("ten 40 MiB uploads at once under max_body_in_flight 128MiB: %d admitted, %d refused 503, %d MiB allocated", admitted, refused, got>>20)
	}
	if n := g.bodies.held.Load(); n != 0 {
		t.Fatalf("%d bytes still held after every request ended", n)
	}
}
