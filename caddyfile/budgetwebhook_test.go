package caddyfile

import (
	"strings"
	"testing"
	"time"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestParseBudgetWebhook(t *testing.T) {
	cfg := parse(t, "llm_gateway {\n\tbudget_webhook https://hooks.example/llm {\n\t\ttimeout 2s\n\t\tqueue 10\n\t}"+remote+"\n}")
	w := cfg.BudgetWebhook
	if w == nil || w.URL != "https://hooks.example/llm" || time.Duration(w.Timeout) != 2*time.Second || w.Queue != 10 {
		t.Fatalf("%+v", w)
	}
	if timeout, queue := parse(t, "llm_gateway {\n\tbudget_webhook http://127.0.0.1:8/h"+remote+"\n}").BudgetWebhook.Limits(); timeout != 5*time.Second || queue != 256 {
		t.Fatalf("defaults: %v %d", timeout, queue)
	}
	for _, tc := range []struct{ input, want string }{
		{"budget_webhook", "takes one URL"},
		{"budget_webhook http://a/ http://b/", "takes one URL"},
		{"budget_webhook ftp://a/", "want an http or https URL"},
		{"budget_webhook /hook", "want an http or https URL"},
		{"budget_webhook http://a/ {\n\t\tqueue 0\n\t}", "queue"},
		{"budget_webhook http://a/ {\n\t\tqueue 20000\n\t}", "want 1 to 10000"},
		{"budget_webhook http://a/ {\n\t\tretries 3\n\t}", "unknown budget_webhook subdirective"},
		{"budget_webhook http://a/\n\tbudget_webhook http://b/", "given twice"},
	} {
		cfg, _, err := ParseWithUI(cf.NewTestDispenser("llm_gateway {\n\t" + tc.input + remote + "\n}"))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.input, err, tc.want)
		}
	}
}
