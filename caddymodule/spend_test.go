package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// What each request cost, through Caddy, with fakes of each cloud provider
// answering the same large usage in their own words (mode "cached":
// 100,000 prompt tokens, 60,000 read from the cache, 10,000 written to it
// where the provider says so, 2,000 out), asked by a Chat and a Messages
// client, as JSON and as a stream. Every request's cost must be the same in
// the X-LLM-Cost trailer, the JSON answer's extra_fields, the access log's
// placeholder, the request span, the history record and
// llm_gateway_cost_usd_total, exact to the cent (and to the nano-dollar),
// and the same whatever API the client spoke.
//
//	anthropic  built-in claude-3-5-sonnet: 30,000 × $3 + 60,000 × $0.30 + 10,000 × $3.75 + 2,000 × $15 per million = $0.1755
//	bedrock    its price line, the same prices                                                             = $0.1755
//	gemini     built-in gemini-2.5-flash: 40,000 × $0.30 + 60,000 × $0.03 + 2,000 × $2.50                     = $0.0188
//	azure      built-in gpt-4o: 40,000 × $2.50 + 60,000 × $1.25 + 2,000 × $10                                 = $0.195
func TestEachRequestsCostIsExactInEverySurface(t *testing.T) {
	pvEnv(t)
	fakes := map[string]*providertest.Fake{
		"anthropic": providertest.Anthropic(t, "cached"), "bedrock": providertest.Bedrock(t, "cached"),
		"gemini": providertest.Gemini(t, "cached"), "azure": providertest.Azure(t, "cached"),
	}
	want := map[string]string{"anthropic": "0.1755", "bedrock": "0.1755", "gemini": "0.0188", "azure": "0.195"}
	real := map[string]string{"anthropic": providertest.ClaudeModel, "bedrock": providertest.BedrockModel, "gemini": providertest.GeminiModel, "azure": providertest.AzureDeployment}
	clients := []struct{ api, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":%q,"max_tokens":60,"stream":%t,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello!"}]}`},
		{"messages", "/v1/messages", `{"model":%q,"max_tokens":60,"stream":%t,"messages":[{"role":"user","content":"Hello!"}]}`},
	}
	run := time.Now().UnixNano() // model names of this run: the history and the metrics outlive a test
	alias := func(provider, api string, stream bool) string {
		return fmt.Sprintf("%s-%s-%t-%d", provider, api, stream, run)
	}
	var site strings.Builder
	site.WriteString("\t\tkeys " + callerKey + "\n\t\tannotate_response on\n")
	site.WriteString("\t\tprice bedrock input 3 output 15 cache_read 0.30 cache_write 3.75\n")
	for provider, f := range fakes {
		var models []string
		for _, c := range clients {
			models = append(models, alias(provider, c.api, false), alias(provider, c.api, true))
		}
		block := map[string]func(*providertest.Fake, string) string{"anthropic": anthropicEngine, "bedrock": bedrockEngine, "gemini": geminiEngine, "azure": azureEngine}[provider](f, "model_name "+real[provider])
		// the engine's own models line names the aliases; model_name sends the real model
		block = strings.Replace(block, "models "+real[provider], "models "+strings.Join(models, " "), 1)
		site.WriteString(block + "\n")
	}
	otlp := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")
	logFile := filepath.Join(t.TempDir(), "access.log")
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	log {
		output file %s
	}
	log_append llm_model {http.llm_gateway.model}
	log_append llm_cost {http.llm_gateway.cost_usd}
	tracing {
		span gateway
	}
	llm_gateway {
%s
	}
}
`, gwAddr, logFile, site.String()))

	since := fmt.Sprint(time.Now().UnixMilli())
	before := scrape(t)
	for provider := range fakes {
		for _, c := range clients {
			for _, stream := range []bool{false, true} {
				model := alias(provider, c.api, stream)
				resp, body := post(t, c.path, fmt.Sprintf(c.body, model, stream), "Authorization", "Bearer "+callerKey, "Anthropic-Version", "2023-06-01")
				if resp.StatusCode != 200 || strings.Contains(body, `"error"`) {
					t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
				}
				if got := resp.Trailer.Get("X-LLM-Cost"); got != want[provider] {
					t.Errorf("%s: X-LLM-Cost %q, want %s", model, got, want[provider])
				}
				if !stream {
					var answer struct {
						Extra struct {
							Cost price.Amount `json:"cost_usd"`
						} `json:"extra_fields"`
					}
					if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Extra.Cost.String() != want[provider] {
						t.Errorf("%s: extra_fields cost %s (%v), want %s: %s", model, answer.Extra.Cost, err, want[provider], body)
					}
				}
				root, _ := otlp.requestSpan(t, model)
				if got := attr(root, "llm_gateway.cost_usd"); got != want[provider] {
					t.Errorf("%s: span llm_gateway.cost_usd %s, want %s", model, got, want[provider])
				}
			}
		}
	}
	after := scrape(t)
	syncHistory(t)
	logged := map[string]string{} // model → the access log's cost
	eventually(t, "every access log line", func() bool {
		for _, line := range strings.Split(readFile(t, logFile), "\n") {
			var l struct {
				Model string `json:"llm_model"`
				Cost  string `json:"llm_cost"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Model != "" {
				logged[l.Model] = l.Cost
			}
		}
		return len(logged) >= len(fakes)*len(clients)*2
	})
	for provider := range fakes {
		for _, c := range clients {
			for _, stream := range []bool{false, true} {
				model := alias(provider, c.api, stream)
				p := historyPage(t, "?model="+model+"&since="+since)
				if len(p.Requests) != 1 || p.Requests[0].Cost.String() != want[provider] {
					t.Errorf("%s: history %+v, want one record costing %s", model, p.Requests, want[provider])
				}
				if logged[model] != want[provider] {
					t.Errorf("%s: the access log's cost %q, want %s", model, logged[model], want[provider])
				}
				labels := `engine="` + provider + `",key="",model="` + model + `"`
				got := sample(t, after, "llm_gateway_cost_usd_total", labels) - sample(t, before, "llm_gateway_cost_usd_total", labels)
				if a, _ := price.ParseAmount(want[provider]); got != a.Float() {
					t.Errorf("%s: llm_gateway_cost_usd_total grew %v, want %s", model, got, want[provider])
				}
			}
		}
	}
}

// Each engine's prices, where llm-probe and the admin API list them, with
// where each comes from; caddy validate warns of a cloud model with none.
func TestPricesAreListedAndAnUnpricedCloudModelIsWarnedOf(t *testing.T) {
	pvEnv(t)
	an := providertest.Anthropic(t, "ok")
	site := anthropicEngine(an, "") + `
		engine local {
			to http://127.0.0.1:9
			models qwen
		}
		engine azure {
			provider azure
			to https://example.openai.azure.com
			api_key {env.PV_AZURE_KEY}
			models my-deployment
		}
		price local input 0.02 output 0.04`
	startGateway(t, site)
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/prices"))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, want := range []string{`"engine": "anthropic"`, `"origin": "builtin"`, `"source": "https://`, `"origin": "price"`, `"origin": "unpriced"`, `"input": "3"`} {
		if !strings.Contains(body, want) {
			t.Errorf("prices lack %s: %s", want, body)
		}
	}
	out, _ := runProbe(t, "--address", adminAddr)
	for _, want := range []string{"CACHE READ", "built-in anthropic, read 2026-12-07 from https://", "price local", "UNPRICED: azure model"} {
		if !strings.Contains(out, want) {
			t.Errorf("llm-probe lacks %q:\n%s", want, out)
		}
	}
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgFile, []byte(":"+freePort(t)+" {\n\tllm_gateway {"+site+"\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := exitCode(t, exec.Command(caddyBinary(t), "validate", "--config", cfgFile, "--adapter", "caddyfile"))
	if code != 0 || !strings.Contains(out, "a cloud model has no price") || !strings.Contains(out, `"model":"my-deployment"`) || strings.Contains(out, `"model":"`+providertest.ClaudeModel+`"`) {
		t.Fatalf("caddy validate: exit %d\n%s", code, out)
	}
}
