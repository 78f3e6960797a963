package handler

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestABusyEngineWithNowhereToGoAnswers429EngineBusyWithRetryAfter(t *testing.T) {
	gpu := newHeldEngine(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, MaxConcurrent: 1},
	}}, nil)
	first := holdOne(t, gpu, url)
	defer func() { gpu.free(); <-first }()

	resp, body := postJSON(t, url, `{"model":"m"}`)
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp.StatusCode != 429 || e.Error.Code != "engine_busy" || e.Error.Type != "rate_limit_error" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("%d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if !strings.Contains(e.Error.Message, "engine gpu is busy") || !strings.Contains(e.Error.Message, "max_concurrent 1") {
		t.Fatalf("message %q", e.Error.Message)
	}

	// on the Messages API it is Anthropic's rate limit error
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":10}`))
	req.Header.Set("Content-Type", "application/json")
	aresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer aresp.Body.Close()
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.NewDecoder(aresp.Body).Decode(&ae); err != nil || aresp.StatusCode != 429 ||
		ae.Type != "error" || ae.Error.Type != "rate_limit_error" || aresp.Header.Get("Retry-After") == "" {
		t.Fatalf("Messages API: %d %v %+v (%v)", aresp.StatusCode, aresp.Header, ae, err)
	}
}
