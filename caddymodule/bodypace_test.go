package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A client that claims 1 MiB and sends 64 KiB of it, through Caddy, over
// HTTP/1.1 and over h2c: each is cut at its pace (the lag of body_timeout
// 12s, a second) with a 408 that names it, not at body_timeout, so the read
// deadline reaches the connection and the HTTP/2 stream through Caddy's
// writers. What they held goes back: an upload of 1 MiB beside them is then
// admitted.
func TestAClaimThatStallsIsCutAtItsPaceThroughCaddy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`)
	}))
	t.Cleanup(up.Close)
	initRaw(t, testGlobals("servers {\n\t\tprotocols h1 h2c\n\t}")+fmt.Sprintf(`http://%s {
	llm_gateway {
		max_body 1MiB
		max_body_in_flight 2MiB
		body_timeout 12s
		engine e {
			to %s
			models m
		}
	}
}
`, gwAddr, up.URL))
	const claim = 1 << 20
	prefix := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 64<<10)
	want := "of its Content-Length of 1024 KiB arrived in"

	// HTTP/1.1: a raw connection that sends its headers and 64 KiB
	conn, err := net.Dial("tcp", gwAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", gwAddr, claim, prefix)

	// h2c: a stream whose body is a pipe, 64 KiB written and then nothing
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(prefix))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions", pr)
	req.ContentLength = claim
	req.Header.Set("Content-Type", "application/json")
	resp, err := h2c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), want) {
		t.Fatalf("h2c: %s %d %s", resp.Proto, resp.StatusCode, b)
	}

	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), want) || !strings.Contains(string(b), "body_timeout (12s)") {
		t.Fatalf("HTTP/1.1: %d %s", resp.StatusCode, b)
	}

	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", claim-100) + `"}]}`
	resp, err = http.Post(gwURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("an upload after the stalled claims: %d %s", resp.StatusCode, b)
	}
}
