package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// A tenant's data is its own (docs/door.md#a-tenants-data-is-its-own), through Caddy: another
// key's session never restores this key's saved slot, and what a client
// sends in User-Agent and X-Session-Id is masked before the history keeps
// it or a span exports it.

const (
	aliceToken = "alice-tenant-key-0001"
	bobToken   = "bob-tenant-key-000002"
)

func TestAnotherKeysSessionNeverRestoresThisKeysSlotThroughCaddy(t *testing.T) {
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 60)
	conversation := func(turns int) openai.ChatCompletionNewParams {
		p := chatParams("l", "alice's conversation: "+long)
		for i := 1; i < turns; i++ {
			p.Messages = append(p.Messages, openai.AssistantMessage("sure"), openai.UserMessage("and then?"))
		}
		return p
	}
	for _, tc := range []struct {
		name string
		opts []option.RequestOption
	}{
		{"X-Session-Id", []option.RequestOption{option.WithHeader("X-Session-Id", "shared")}},
		{"prompt prefix", nil}, // no session key: the blocks of her prompt name it
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			startGateway(t, `
		key alice `+aliceToken+`
		key bob `+bobToken+`
		engine l {
			`+engineCmd("--model l --slots 2 --slot-save-path "+dir)+`
			models l
			slots save `+dir+` {
				parallel 2
			}
		}`)
			ctx := context.Background()
			stop := func() {
				t.Helper()
				if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/l/stop")); resp.StatusCode != 200 {
					t.Fatalf("stop: %d %s", resp.StatusCode, body)
				}
			}
			if _, err := sdk(aliceToken).Chat.Completions.New(ctx, conversation(2), tc.opts...); err != nil {
				t.Fatal(err)
			}
			stop() // alice's slot is saved
			// bob probes alice's conversation, with her session id or her prompt
			if _, err := sdk(bobToken).Chat.Completions.New(ctx, conversation(3), tc.opts...); err != nil {
				t.Fatal(err)
			}
			if c := engineCounters(t, "l"); c.Restored != 0 {
				t.Fatalf("bob's turn had alice's slot restored (%d tokens): her conversation shows in his timings", c.Restored)
			}
			stop() // bob's slot is saved: to a file of his own
			if files, _ := filepath.Glob(filepath.Join(dir, "*.bin")); len(files) != 2 {
				t.Fatalf("slot files %v: bob's save overwrote alice's", files)
			}
			if _, err := sdk(aliceToken).Chat.Completions.New(ctx, conversation(3), tc.opts...); err != nil {
				t.Fatal(err)
			}
			if c := engineCounters(t, "l"); c.Restored == 0 || c.Processed*5 > c.Restored {
				t.Fatalf("alice's resumed turn: restored %d tokens, processed %d", c.Restored, c.Processed)
			}
		})
	}
}

// secretHeaders are a User-Agent and an X-Session-Id that hold tokens, and
// the tokens.
var secretHeaders = []string{"User-Agent", "my-agent/1.0 (Bearer ua-secret-0123456789)", "X-Session-Id", "sk-session0123456789abcdef"}
var headerSecrets = []string{"ua-secret-0123456789", "session0123456789abcdef"}

func holdsASecret(s string) bool {
	for _, secret := range headerSecrets {
		if strings.Contains(s, secret) {
			return true
		}
	}
	return false
}

func TestATokenSentAsUserAgentOrSessionIsNotKeptInTheHistory(t *testing.T) {
	since := fmt.Sprint("&since=", time.Now().UnixMilli())
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		key alice %s
		engine gpu {
			to %s
			models masked-history
		}`, aliceToken, up.URL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"masked-history","messages":[{"role":"user","content":"hi"}]}`,
		append([]string{"Authorization", "Bearer " + aliceToken}, secretHeaders...)...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	syncHistory(t)
	p := historyPage(t, "?model=masked-history"+since)
	if len(p.Requests) != 1 {
		t.Fatalf("page %+v", p)
	}
	rec := p.Requests[0]
	if holdsASecret(rec.UserAgent) || holdsASecret(rec.Session) || !strings.HasPrefix(rec.UserAgent, "my-agent/1.0") || !strings.Contains(rec.Session, "****") {
		t.Fatalf("the history keeps user agent %q, session %q", rec.UserAgent, rec.Session)
	}
}

func TestATokenSentAsUserAgentOrSessionIsNotExportedInASpan(t *testing.T) {
	o := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", o.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// a config without tracing first: the next tracer provider is made
	// with this receiver's environment (as TestEachRequestIsOneTraceWithASpanPerAttempt)
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")
	up := newRecorder(t, usageChat)
	startTracedGateway(t, fmt.Sprintf(`
		engine gpu {
			to %s
			models masked-span
		}`, up.URL))
	if resp, body := post(t, "/v1/chat/completions", `{"model":"masked-span","messages":[{"role":"user","content":"hi"}]}`, secretHeaders...); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	root, tries := o.requestSpan(t, "masked-span")
	if s := attr(root, "gen_ai.gateway.session.id"); holdsASecret(s) || !strings.Contains(s, "****") {
		t.Errorf("the request span's session id is %q", s)
	}
	server := o.spanWithID(t, root.ParentSpanId) // Caddy's, which holds the User-Agent
	if ua := attr(server, "user_agent.original"); holdsASecret(ua) || !strings.HasPrefix(ua, "my-agent/1.0") {
		t.Errorf("Caddy's server span's user agent is %q", ua)
	}
	if s := fmt.Sprint(root, tries, server); holdsASecret(s) {
		t.Errorf("a span holds a token sent in a header")
	}
}

// spanWithID waits for the span with id.
func (o *otlpReceiver) spanWithID(t *testing.T, id []byte) *tracepb.Span {
	t.Helper()
	deadline := time.After(20 * time.Second) // an upper bound only: the batcher exports every 50ms
	for {
		o.mu.Lock()
		got := o.got
		for _, s := range o.spans {
			if bytes.Equal(s.SpanId, id) {
				o.mu.Unlock()
				return s
			}
		}
		o.mu.Unlock()
		select {
		case <-got:
		case <-deadline:
			t.Fatalf("no span %x", id)
		}
	}
}

// TestOperatorsOnASiteCannotLockTheAdminEndpointsPageOut: an operator key
// opening status-page streams on the site until it is refused leaves the
// admin endpoint's page the streams kept for it (statuspage's
// adminReserve).
func TestOperatorsOnASiteCannotLockTheAdminEndpointsPageOut(t *testing.T) {
	startGateway(t, fmt.Sprintf(uiSite, engineCmd("")))
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	open := func(url string, header ...string) int {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel) // the stream ends with the test
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode
	}
	site := 0
	for ; site <= 64; site++ {
		if st := open(gwURL+"/llm/api/events", "Authorization", "Bearer "+uiKey); st != 200 {
			if st != http.StatusServiceUnavailable {
				t.Fatalf("the site's stream %d: %d", site+1, st)
			}
			break
		}
	}
	if site > 56 {
		t.Fatalf("an operator on the site opened %d streams: more than the 56 sites' pages share", site)
	}
	if st := open(adminURL+"/llm_gateway/ui/api/events", "Sec-Fetch-Mode", "cors", "Referer", adminURL+"/llm_gateway/ui/"); st != 200 {
		t.Fatalf("the admin endpoint's page, the site's streams all taken: %d", st)
	}
}
