package handler

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// tried as a key holder would against an engine that reads every
// request as the laxest real engines do (internal/laxengine): whatever the
// gateway admits, the engine runs exactly what the gateway read.

// jsonThenForm is the first HIGH finding: a JSON object followed by a valid
// form, sent as multipart/form-data.
func jsonThenForm(json, model string) (string, string) {
	return json + "\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + model + "\r\n--b--\r\n", "multipart/form-data; boundary=b"
}

func TestTheEngineRunsOnlyWhatTheGatewayRead(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	on := true
	_, url := testGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x", "whisper-1"}}},
		Engines: []engines.Config{
			{Name: "x", To: laxURL, Models: []string{"x"}},
			{Name: "whisper", To: laxURL, Models: []string{"whisper-1"}},
			{Name: "secret", To: laxURL, Models: []string{"secret"}},
		},
		Passthrough: &on,
	}, nil)
	secret := `{"model":"secret","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	form, formType := jsonThenForm(secret, "whisper-1")
	chatForm, _ := jsonThenForm(secret, "x")
	for _, c := range []struct {
		name, path, body, contentType string
		want                          int
	}{
		{"JSON then a form on a JSON route", "/v1/chat/completions", chatForm, formType, 415},
		{"the same, its type in capitals", "/v1/chat/completions", chatForm, " Multipart/Form-Data; boundary=b", 415},
		{"JSON then a form on a form route", "/v1/audio/transcriptions", form, formType, 400},
		{"JSON on a form route", "/v1/audio/transcriptions", secret, "application/json", 415},
		{"a byte order mark", "/v1/chat/completions", "\xEF\xBB\xBF" + secret, "application/json", 400},
		{"UTF-16", "/v1/chat/completions", laxengine.UTF16LE(secret), "application/json", 400},
		{"a byte order mark on /upstream/", "/upstream/x/v1/chat/completions", "\xEF\xBB\xBF" + secret, "application/json", 400},
		{"UTF-16 on /upstream/", "/upstream/x/v1/chat/completions", laxengine.UTF16LE(secret), "application/json", 400},
		{"UTF-16 on /upstream/ without a Content-Type", "/upstream/x/v1/chat/completions", laxengine.UTF16LE(secret), "", 400},
		{"JSON then a form on /upstream/", "/upstream/x/v1/chat/completions", chatForm, formType, 400},
	} {
		st, body := call(t, url, teamKey, "POST", c.path, c.body, "Content-Type", c.contentType)
		if st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
	for _, r := range lax.Ran() {
		t.Errorf("the engine ran %q", r.Model)
	}
}

// The MEDIUM finding on numbers: 50 concurrent streams of a 20k/d key,
// each spelling its limit or its choices as a lax engine reads them, use at
// most 1.2 times the budget (it was 4.75x for "5000", 9.3x with n: 10).
func TestEverySpellingOfALimitReservesWhatTheEngineGenerates(t *testing.T) {
	for _, body := range []string{
		`{"model":"x","stream":true,"max_tokens":"5000","messages":[]}`,
		`{"model":"x","stream":true,"max_tokens":5e3,"messages":[]}`,
		`{"model":"x","stream":true,"max_completion_tokens":5000.0,"messages":[]}`,
		`{"model":"x","stream":true,"max_tokens":1000,"n":10,"messages":[]}`,
		`{"model":"x","stream":true,"max_tokens":"1000","n":"5","best_of":10,"messages":[]}`,
		`{"model":"x","stream":true,"n":10,"messages":[]}`,
		`{"model":"x","stream":true,"max_tokens":1,"n_predict":5000,"messages":[]}`,
		`{"model":"x","stream":true,"max_tokens":1,"min_tokens":"5000","messages":[]}`,
	} {
		t.Run(body, func(t *testing.T) {
			lax, laxURL := laxUpstream(t)
			url := budgetGateway(t, config.Config{
				Keys:    []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "20000/d")}},
				Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}},
			}, clock.NewFake())
			got := burst(t, 50, func(int) int {
				st, _ := call(t, url, teamKey, "POST", "/v1/chat/completions", body)
				return st
			})
			if used := lax.Tokens(); float64(used) > 1.2*20000 || got[200] == 0 {
				t.Fatalf("%d tokens generated of 20000 (%v)", used, got)
			} else {
				t.Logf("%d tokens generated of 20000 by 50 concurrent streams (%v)", used, got)
			}
		})
	}
}

func TestAFlagOrNumberNoEngineReadsAsTheGatewayIsRefused(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}}}, nil)
	for _, c := range []struct{ body, member string }{
		{`{"model":"x","stream":"true"}`, "stream"},
		{`{"model":"x","stream":1}`, "stream"},
		{`{"model":"x","stream":"yes"}`, "stream"},
		{`{"model":"x","max_tokens":true}`, "max_tokens"},
		{`{"model":"x","max_tokens":"lots"}`, "max_tokens"},
		{`{"model":"x","n":2.5}`, `\"n\"`},
		{`{"model":"x","n":1,"N":10}`, `\"n\"`},
	} {
		st, body := call(t, url, "", "POST", "/v1/chat/completions", c.body)
		if st != 400 || !strings.Contains(body, c.member) {
			t.Errorf("%s: %d %s", c.body, st, body)
		}
	}
	if ran := lax.Ran(); len(ran) != 0 {
		t.Fatalf("the engine ran %v", ran)
	}
	if st, body := call(t, url, "", "POST", "/v1/chat/completions", `{"model":"x","stream":null,"max_tokens":null}`); st != 200 {
		t.Fatalf("null is absent: %d %s", st, body)
	}
}

// The MEDIUM finding on unsized bodies: one that stops sending is cut at
// body_timeout with a 408, and its connection let go.
func TestABodyThatStopsArrivingIsCutAtBodyTimeout(t *testing.T) {
	_, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{
		BodyTimeout: caddy.Duration(200 * time.Millisecond),
		Engines:     []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}},
	}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n10\r\n{\"model\":\"x\",\"me\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(b.String(), "body_timeout") {
		t.Fatalf("%d %s", resp.StatusCode, b.String())
	}
}

func TestAnErrorNamesAHugeModelWithoutEchoingIt(t *testing.T) {
	_, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}}}, nil)
	huge := strings.Repeat("m", 100<<10)
	st, body := call(t, url, "", "POST", "/v1/chat/completions", `{"model":"`+huge+`"}`)
	if st != 404 || len(body) > 2<<10 {
		t.Fatalf("%d, %d bytes", st, len(body))
	}
}

// A body that asks for an answer without an end (llama-server's n_predict
// -1 overrides max_tokens, and it reads a negative max_tokens as n_predict;
// ignore_eos without a limit) has no reservation that bounds it: a key with
// a token budget may not send one. The 400 is in the client's API's shape.
func TestAnAnswerWithoutAnEndIsRefusedToABudget(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	url := budgetGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "20000/d")}, {Name: "ops", Value: opsKey}},
		Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}},
	}, clock.NewFake())
	for _, body := range []string{
		`{"model":"x","max_tokens":1,"n_predict":-1,"messages":[]}`,
		`{"model":"x","ignore_eos":true,"messages":[]}`,
		`{"model":"x","max_tokens":-1,"messages":[]}`,
		`{"model":"x","max_completion_tokens":"-1","messages":[]}`,
		`{"model":"x","max_output_tokens":-5e3,"messages":[]}`,
	} {
		if st, out := call(t, url, teamKey, "POST", "/v1/chat/completions", body); st != 400 || !strings.Contains(out, "unbounded_answer") {
			t.Errorf("%s: %d %s", body, st, out)
		}
	}
	st, out := call(t, url, teamKey, "POST", "/v1/messages", `{"model":"x","max_tokens":-1,"messages":[]}`)
	if st != 400 || !strings.Contains(out, `"type":"error"`) || !strings.Contains(out, "unbounded_answer") && !strings.Contains(out, "no limit bounds") {
		t.Errorf("a Messages client's negative max_tokens: %d %s", st, out)
	}
	if ran := lax.Ran(); len(ran) != 0 {
		t.Fatalf("the engine ran %v", ran)
	}
	// a limit bounds ignore_eos; a key without a budget is not held
	if st, out := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"x","ignore_eos":true,"max_tokens":5,"messages":[]}`); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if st, out := call(t, url, opsKey, "POST", "/v1/chat/completions", `{"model":"x","n_predict":-1,"messages":[]}`); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
}

// Bodies the gateway would not read as sent are refused, on /v1/ and on
// /upstream/: an encoded one, and a form whose Content-Type does not parse
// (a lenient engine would still read its form).
func TestABodyTheGatewayCannotReadAsSentIsRefused(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}}}, nil)
	for _, c := range []struct{ path, body, header, value string }{
		{"/v1/chat/completions", `{"model":"x"}`, "Content-Encoding", "gzip"},
		{"/upstream/x/v1/chat/completions", "\x1f\x8b", "Content-Encoding", "gzip"},
		{"/upstream/x/inference", form, "Content-Type", "multipart/form-data; boundary=b; junk"},
	} {
		if st, out := call(t, url, "", "POST", c.path, c.body, c.header, c.value); st != http.StatusUnsupportedMediaType {
			t.Errorf("%s with %s %s: %d %s", c.path, c.header, c.value, st, out)
		}
	}
	if ran := lax.Ran(); len(ran) != 0 {
		t.Fatalf("the engine ran %v", ran)
	}
}

const form = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsecret\r\n--b--\r\n"

// A refused body's connection is closed after the refusal: net/http would
// otherwise read up to 256 KiB more of it, with no deadline.
func TestARefusedBodysConnectionIsClosed(t *testing.T) {
	_, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{MaxBody: 1024, Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}}}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n%s\r\n", strings.Repeat("a", 2048))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("%d, closed %v", resp.StatusCode, resp.Close)
	}
}
