package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

// bodyFallbackGateway: primary answers with status (and a body), other and
// third answer 200; returns the recorders.
func bodyFallbackGateway(t *testing.T, primaryStatus int, extra string) (primary, other, third *recorder) {
	primary = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if primaryStatus == 200 {
			okChat(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(primaryStatus)
		fmt.Fprintf(w, `{"error":{"message":"primary says %d","type":"server_error","code":"p%d"}}`, primaryStatus, primaryStatus)
	})
	other = newRecorder(t, sseAnswer("from", " other"))
	third = newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		%s
		engine primary {
			to %s
			models big
			retries 0
		}
		engine other {
			to %s
			models other-a other-b
		}
		engine third {
			to %s
			models third
			model_name third-upstream
		}`, extra, primary.URL, other.URL, third.URL))
	return primary, other, third
}

func TestBodyFallbackAnswersWhenThePrimaryFails(t *testing.T) {
	primary, other, _ := bodyFallbackGateway(t, 503, "")
	var raw *http.Response
	resp, err := sdk("").Chat.Completions.New(context.Background(), chatParams("big", "hi"),
		option.WithJSONSet("fallbacks", []string{"other/other-b", "third"}), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("X-LLM-Engine") != "other" || resp.Choices[0].Message.Content != "ok" {
		t.Fatalf("%v %+v", raw.Header, resp)
	}
	got := string(other.all()[0].body)
	if strings.Contains(got, "fallbacks") || !strings.Contains(got, `"model":"other-b"`) {
		t.Fatalf("the fallback was sent %s", got)
	}
	if p := string(primary.all()[0].body); strings.Contains(p, "fallbacks") {
		t.Fatalf("the primary was sent the field: %s", p)
	}
}

func TestBodyFallbacksFieldIsRemovedByteExactly(t *testing.T) {
	primary, _, _ := bodyFallbackGateway(t, 200, "")
	body := `{"fallbacks": ["other"],  "model":"big", "messages":[{"role":"user","content":"hi","fallbacks":["x"]}] }`
	resp, out := post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	want := `{  "model":"big", "messages":[{"role":"user","content":"hi","fallbacks":["x"]}] }`
	if got := string(primary.all()[0].body); got != want {
		t.Fatalf("upstream got\n%s\nwant\n%s", got, want)
	}
}

func TestBodyFallbacksDoNotTriggerOnABadRequest(t *testing.T) {
	primary, other, third := bodyFallbackGateway(t, 400, "")
	resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":["other","third"]}`)
	if resp.StatusCode != 400 || body != `{"error":{"message":"primary says 400","type":"server_error","code":"p400"}}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(primary.all()) != 1 || len(other.all())+len(third.all()) != 0 {
		t.Fatal("a 400 triggered a fallback")
	}
}

func TestAllBodyFallbacksFailingGivesThePrimarysErrorAndTheAttempts(t *testing.T) {
	dead := newRecorder(t, okChat)
	deadURL := dead.URL
	dead.Close()
	primary := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(502)
		io.WriteString(w, `{"error":{"message":"bad gateway upstream","type":"server_error"}}`)
	})
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) })
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			retries 0
		}
		engine other {
			to %s
			models o
			retries 0
		}
		engine gone {
			to %s
			models g
		}`, primary.URL, other.URL, deadURL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":["other","gone/g"]}`)
	if resp.StatusCode != 502 || !strings.Contains(body, "bad gateway upstream (attempts: primary=502, other=429, gone=connect)") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestUnknownOrAddressFallbackIsRefusedBeforeAnythingIsSent(t *testing.T) {
	primary, other, third := bodyFallbackGateway(t, 200, "")
	for _, item := range []string{`"nope"`, `"http://10.0.0.1:8080"`, `"//evil"`, `""`, `"other/"`, `"other/o1-pro"`, `42`, `{"engine":"other"}`} {
		resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":["third",`+item+`]}`)
		if resp.StatusCode != 400 || !strings.Contains(body, "invalid_fallbacks") || !strings.Contains(body, "item 1") {
			t.Fatalf("item %s: %d %s", item, resp.StatusCode, body)
		}
	}
	resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":"other"}`)
	if resp.StatusCode != 400 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := len(primary.all()) + len(other.all()) + len(third.all()); n != 0 {
		t.Fatalf("%d requests reached an upstream", n)
	}
}

func TestStreamingThroughABodyFallback(t *testing.T) {
	_, other, _ := bodyFallbackGateway(t, 500, "")
	text, err := readStream(sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("big", "hi"),
		option.WithJSONSet("fallbacks", []string{"other/other-a"})))
	if err != nil || text != "from other" {
		t.Fatalf("%q %v", text, err)
	}
	if strings.Contains(string(other.all()[0].body), "fallbacks") {
		t.Fatal("the field reached the fallback")
	}
}

func TestAnnotateResponseNamesTheProvider(t *testing.T) {
	bodyFallbackGateway(t, 503, "annotate_response on")
	resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":["other","third"]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var doc struct {
		Choices     []any
		ExtraFields struct {
			Provider      string
			Model         string
			LatencyMS     *int64 `json:"latency_ms"`
			FallbackIndex int    `json:"fallback_index"`
		} `json:"extra_fields"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	e := doc.ExtraFields
	if e.Provider != "other" || e.Model != "other-a" || e.LatencyMS == nil || e.FallbackIndex != 1 || len(doc.Choices) != 1 {
		t.Fatalf("extra_fields %+v in %s", e, body)
	}
}

func TestBodyFallbacksOffStripsAndRefuses(t *testing.T) {
	primary, _, _ := bodyFallbackGateway(t, 200, "body_fallbacks off")
	resp, body := post(t, "/v1/chat/completions", `{"model":"big","fallbacks":["other"]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "body_fallbacks off") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(primary.all()) != 0 {
		t.Fatal("a refused request reached the primary")
	}
}
