package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// Routes by name, not by prefix (issue 51), as a table through Caddy:
// route × client API × key with or without rules → the status, and which
// engine was reached (or none). Before, any POST under /v1/ reached an
// engine that speaks OpenAI's API, whatever the key: a fine-tuning job of
// 50 epochs on a key allowed one model was 200, and /v1/messages/batches
// reached Anthropic's engine with another model inside its body. Now a
// path no API lists is a 404 unless an engine's routes line names it, and
// then it reaches only that engine, for keys without rules.
func TestRoutesAreServedByName(t *testing.T) {
	answer := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/v1/messages") {
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		okChat(w, r)
	}
	oa, anth, plain := newRecorder(t, answer), newRecorder(t, answer), newRecorder(t, answer)
	const team, ops = "team-key-0123456789abcdef", "ops-key-0123456789abcdefg"
	startGateway(t, fmt.Sprintf(`
		key team %s {
			models gpt claude other
		}
		key ops %s
		engine oa {
			to %s
			models gpt
			routes /v1/fine_tuning/* /v1/batches
		}
		engine anth {
			to %s
			api anthropic
			models claude
			routes /v1/messages/batches
		}
		engine plain {
			to %s
			models other
		}`, team, ops, oa.URL, anth.URL, plain.URL))

	chat := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"Hello!"}]}`
	}
	messages := func(model string) string {
		return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"Hello!"}]}`
	}
	tune := `{"model":"gpt","training_file":"file-abc","hyperparameters":{"n_epochs":50}}`
	batch := `{"model":"claude","requests":[{"custom_id":"a","params":{"model":"claude-opus-4","max_tokens":5,"messages":[]}}]}`
	engines := map[*recorder]string{oa: "oa", anth: "anth", plain: "plain"}
	for _, c := range []struct {
		key, method, path, body string
		want                    int
		code                    string // the gateway's own refusal
		reached                 string // the engine sent it, "" for none
	}{
		// the APIs' routes: every key, for its models
		{team, "POST", "/v1/chat/completions", chat("gpt"), 200, "", "oa"},
		{ops, "POST", "/v1/chat/completions", chat("other"), 200, "", "plain"},
		{team, "POST", "/v1/messages", messages("claude"), 200, "", "anth"},
		{team, "POST", "/v1/embeddings", `{"model":"gpt","input":"hi"}`, 200, "", "oa"},
		{team, "POST", "/v1/rerank", `{"model":"other","query":"q","documents":["a"]}`, 200, "", "plain"},
		{team, "POST", "/v1/audio/speech", `{"model":"gpt","input":"hi","voice":"alloy"}`, 200, "", "oa"},
		// routes an engine names: keys without rules, that engine only
		{team, "POST", "/v1/fine_tuning/jobs", tune, 403, "route_not_allowed", ""},
		{ops, "POST", "/v1/fine_tuning/jobs", tune, 200, "", "oa"},
		{ops, "POST", "/v1/fine_tuning/jobs", strings.Replace(tune, `"gpt"`, `"other"`, 1), 404, "route_not_found", ""},
		{team, "POST", "/v1/batches", `{"model":"gpt","input_file_id":"file-abc"}`, 403, "route_not_allowed", ""},
		{ops, "POST", "/v1/batches", `{"model":"gpt","input_file_id":"file-abc"}`, 200, "", "oa"},
		{team, "POST", "/v1/messages/batches", batch, 403, `"permission_error"`, ""}, // Anthropic's shape
		{ops, "POST", "/v1/messages/batches", batch, 200, "", "anth"},
		{ops, "POST", "/v1/messages/batches", strings.Replace(batch, `"claude"`, `"gpt"`, 1), 404, `"not_found_error"`, ""},
		// routes nobody names: a 404 for every key, whatever the method
		{team, "POST", "/v1/files", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{ops, "POST", "/v1/files", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{ops, "GET", "/v1/files", "", 404, "route_not_found", ""},
		{ops, "POST", "/v1/assistants", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{ops, "POST", "/v1/vector_stores", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{team, "POST", "/v1/threads/runs", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{ops, "POST", "/v1/fine_tuning", `{"model":"gpt"}`, 404, "route_not_found", ""},
		{team, "POST", "/v1/x/chat/completions", chat("gpt"), 404, "route_not_found", ""},
		{team, "POST", "/v1/messages/count_tokens/x", messages("claude"), 404, `"not_found_error"`, ""},
	} {
		before := map[*recorder]int{}
		for r := range engines {
			before[r] = len(r.all())
		}
		req, _ := http.NewRequest(c.method, gwURL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		resp, out := do(t, req)
		name := c.method + " " + c.path + " as " + map[string]string{team: "a key with rules", ops: "a key without"}[c.key]
		if resp.StatusCode != c.want || c.code != "" && !strings.Contains(out, c.code) {
			t.Errorf("%s: %d %s, want %d %s", name, resp.StatusCode, out, c.want, c.code)
		}
		reached := ""
		for r, n := range engines {
			if got := r.all(); len(got) > before[r] {
				reached += n
				if got[len(got)-1].path != c.path {
					t.Errorf("%s: %s was sent %s", name, n, got[len(got)-1].path)
				}
			}
		}
		if reached != c.reached {
			t.Errorf("%s: reached %q, want %q", name, reached, c.reached)
		}
	}

	// as the OpenAI SDK sees the finding: a fine-tuning job on a key with
	// rules is refused, in OpenAI's shape, and reaches nothing
	n := len(oa.all())
	_, err := sdk(team).FineTuning.Jobs.New(context.Background(), openai.FineTuningJobNewParams{Model: "gpt", TrainingFile: "file-abc"})
	if e := apiError(t, err, 403); e.Code != "route_not_allowed" || !strings.Contains(e.Message, "engine oa") {
		t.Fatalf("%s: %s", e.Code, e.Message)
	}
	if len(oa.all()) != n {
		t.Fatal("the fine-tuning job reached the engine")
	}
}
