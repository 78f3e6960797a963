package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A front door that restarts with a stream open: Caddy's grace_period
// bounds the wait for it, and shortly before the period ends the stream
// gets an error event saying the gateway is going away and a clean end (a
// whole chunked body), not a cut; its engine hears the request end.
func TestAStreamOpenAtAReloadEndsWithGoingAwayBeforeTheGracePeriod(t *testing.T) {
	const grace = 2 * time.Second
	config := func(maxBody string) string {
		return fmt.Sprintf(`{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	https_port @HTTPS@
	grace_period %s
}
http://%s {
	llm_gateway {
		max_body %s
		engine slow {
			%s
			models slow
		}
	}
}
`, grace, gwAddr, maxBody, engineCmd(`--reply "`+strings.Repeat("word ", 100)+`" --words-per-chunk 1 --chunk-delay 100ms`))
	}
	initRaw(t, config("1MB"))

	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("no first event: %q %v", line, err)
	}

	// a reload replaces the server (a setting changed): the old one waits
	// for the stream at most its grace period
	reloaded := time.Now()
	initRaw(t, config("2MB"))
	rest, err := io.ReadAll(body)
	took := time.Since(reloaded)
	if err != nil {
		t.Fatalf("the stream was cut %v after the reload: %v\n%s", took, err, rest)
	}
	text := string(rest)
	if !strings.Contains(text, `"gateway_going_away"`) || strings.Contains(text, "[DONE]") {
		t.Fatalf("the stream did not end with the going-away event:\n%s", text)
	}
	if last := strings.TrimSpace(text[strings.LastIndex(strings.TrimSpace(text), "\n")+1:]); !strings.Contains(last, "gateway_going_away") {
		t.Fatalf("the going-away event is not the stream's last: %q", last)
	}
	if took > 5*grace {
		t.Fatalf("the stream ended %v after the reload, its grace period being %v", took, grace)
	}
	t.Logf("a stream open at a reload with grace_period %v ended with gateway_going_away %v after it", grace, took.Round(time.Millisecond))
	// its engine heard the request end: the upstream was cancelled
	eventually(t, "the engine hears its client leave", func() bool {
		return strings.Contains(strings.Join(status(t, "slow").LastLines, "\n"), "client went away mid-stream")
	})
}
