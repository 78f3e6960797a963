package handler

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestPaceDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	const T = 2 * time.Minute
	for _, c := range []struct {
		timeout     time.Duration
		length, got int64
		after       time.Duration
		behind      bool
		why         string
	}{
		{T, 40 << 20, 0, 10 * time.Second, true, "nothing sent: the lag alone"},
		{T, 40 << 20, 10 << 20, 40 * time.Second, true, "a quarter sent: a quarter of body_timeout, and the lag"},
		{T, 40 << 20, 39 << 20, T, false, "past body_timeout: body_timeout's deadline"},
		{T, 40 << 20, 40 << 20, T, false, "all of it sent"},
		{12 * time.Second, 1 << 20, 0, time.Second, true, "a short body_timeout: a twelfth of it as the lag"},
		{time.Hour, 1 << 20, 1 << 19, 30*time.Minute + 10*time.Second, true, "a long one: 10 s of lag"},
	} {
		at, behind := paceDeadline(start, c.timeout, c.length, c.got)
		if at.Sub(start) != c.after || behind != c.behind {
			t.Errorf("%s: %v after the start, behind %v; want %v, %v", c.why, at.Sub(start), behind, c.after, c.behind)
		}
	}
}

// Two clients that claim 1 MiB each and send 64 KiB hold what they claimed
// under max_body_in_flight 2MiB, and an upload is refused; each is cut with
// a 408 that names its pace at about a second (the lag of body_timeout
// 12s) rather than at body_timeout, and the upload then goes through.
func TestABodyBehindItsPaceIsCutAndLetsGoOfWhatItHeld(t *testing.T) {
	_, laxURL := laxUpstream(t)
	g, url := testGateway(t, config.Config{
		MaxBody: 1 << 20, MaxBodyInFlight: 2 << 20, BodyTimeout: caddy.Duration(12 * time.Second),
		Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}},
	}, nil)
	drain()
	upload := `{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20-100) + `"}]}`
	post := func() (int, string) {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(upload))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := post(); st != 200 {
		t.Fatalf("an upload alone: %d %s", st, body)
	}

	// a client that claims 1 MiB: the gateway's 100 Continue says it took
	// it; 64 KiB of it is sent, then nothing
	slow := func() *bufio.Reader {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 1<<20)
		br := bufio.NewReader(conn)
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, "100 Continue") {
			t.Fatalf("%q %v", line, err)
		}
		br.ReadString('\n') // the blank line after it
		conn.Write([]byte(`{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 64<<10)))
		return br
	}
	a, b := slow(), slow()
	if held := g.bodies.held.Load(); held != 2*(1<<20-freeBody) {
		t.Fatalf("the two claims hold %d bytes", held)
	}
	if st, body := post(); st != http.StatusServiceUnavailable || !strings.Contains(body, "bodies_in_flight") {
		t.Fatalf("an upload beside two claims of 1 MiB under 2 MiB: %d %s", st, body)
	}
	for _, br := range []*bufio.Reader{a, b} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		// what arrived is not asserted: a busy machine may cut before the 64 KiB are read
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "fell behind its pace: ") ||
			!strings.Contains(string(body), "within body_timeout (12s) at an even pace, here 85 KiB/s, at most 1s behind") {
			t.Fatalf("a claim that stalled: %d %s", resp.StatusCode, body)
		}
	}
	for cut := 0; cut < 2; { // each has ended, and let go of what it held
		if res := <-served; res.Status == http.StatusRequestTimeout {
			cut++
		}
	}
	if st, body := post(); st != 200 {
		t.Fatalf("an upload once the stalled claims were cut: %d %s", st, body)
	}
}
