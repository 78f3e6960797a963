package caddymodule

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

// Users Caddy's basic_auth knows (bcrypt at the lowest cost, so the test
// spends no time hashing): alice-password-1 and bob-password-22.
const basicAuthUsers = `
		alice $2a$04$RjMHdQECDFbNluxOf0elie7WaRq1V0tEcCKPbjidNAdcwdpnp.vsa
		bob $2a$04$DAl4oTO/gvaoI3ZU3dlQ6.T6h2rde6BLBBOaT87ddMQVvNbacADza`

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// A team that signs in through Caddy's basic_auth gets per-user rules
// without gateway keys: the identity's models hold, its requests are
// counted, kept in the history and traced under its name, and a request
// without credentials is basic_auth's 401, before the gateway.
func TestBasicAuthInFrontGivesEachUserItsRules(t *testing.T) {
	o := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", o.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// a config without tracing lets go of an earlier tracer provider (see
	// TestEachRequestIsOneTraceWithASpanPerAttempt)
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")
	up := newRecorder(t, usageChat)
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	tracing {
		span gateway
	}
	basic_auth {%s
	}
	llm_gateway {
		identity {http.auth.user.id} {
			user alice {
				models id-small
				tokens 1M/d
			}
			default {
				models id-big
			}
		}
		engine small {
			to %s
			models id-small
		}
		engine big {
			to %s
			models id-big
		}
	}
}
`, gwAddr, basicAuthUsers, up.URL, up.URL))
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/user:alice/reset")); resp.StatusCode != 200 {
		t.Fatalf("reset: %d %s", resp.StatusCode, body) // the counters outlive a test in this binary
	}
	ctx := context.Background()
	as := func(user, password string) []option.RequestOption {
		return []option.RequestOption{option.WithHeader("Authorization", basic(user, password))}
	}
	if _, err := sdk("", as("alice", "alice-password-1")...).Chat.Completions.New(ctx, chatParams("id-small", "hi")); err != nil {
		t.Fatalf("alice's model: %v", err)
	}
	_, err := sdk("", as("alice", "alice-password-1")...).Chat.Completions.New(ctx, chatParams("id-big", "hi"))
	if e := apiError(t, err, 403); e.Code != "model_not_allowed" || !strings.Contains(e.Message, "user:alice") {
		t.Fatalf("another model: %+v", e)
	}
	// bob has no block of his own: the default's
	if _, err := sdk("", as("bob", "bob-password-22")...).Chat.Completions.New(ctx, chatParams("id-big", "hi")); err != nil {
		t.Fatalf("bob, by the default block: %v", err)
	}
	_, err = sdk("", as("bob", "bob-password-22")...).Chat.Completions.New(ctx, chatParams("id-small", "hi"))
	apiError(t, err, 403)
	// no credentials, or wrong ones: basic_auth's 401, the gateway never asked
	for _, auth := range []string{"", basic("alice", "wrong"), "Bearer sk-llmgw-not-a-key-0123456789"} {
		req := mustReq(http.MethodPost, gwURL+"/v1/chat/completions")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, body := do(t, req)
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") || strings.Contains(body, "invalid_api_key") {
			t.Fatalf("%q: %d %v %s", auth, resp.StatusCode, resp.Header, body)
		}
	}

	// the identity in the spans, the history, the counters and the metrics
	span, _ := o.requestSpan(t, "id-small")
	if got := attr(span, "llm_gateway.key.name"); got != "user:alice" {
		t.Fatalf("the span's key: %q", got)
	}
	eventually(t, "alice's requests in the history", func() bool {
		_, history := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/requests?key=user:alice"))
		return strings.Count(history, `"key": "user:alice"`) == 2
	})
	_, keys := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys/user:alice"))
	if !strings.Contains(keys, `"used": 10`) {
		t.Fatalf("alice's counters: %s", keys)
	}
	metrics := scrape(t)
	if sample(t, metrics, "llm_gateway_key_refusals_total", `key="user:alice",reason="model"`) < 1 ||
		sample(t, metrics, "llm_gateway_key_tokens_total", `key="user:alice",kind="prompt"`) < 7 {
		t.Fatalf("alice's metrics:\n%s", grepLines(metrics, "user:alice"))
	}
}
