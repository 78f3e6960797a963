package compatible_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	_ "github.com/llmgateway/caddy-llm-gateway/caddymodule"
	"github.com/llmgateway/caddy-llm-gateway/providers"

	_ "example.com/llm-gateway-provider-compatible"
)

const (
	cloudKey = "cloud-secret-key-0001"
	model    = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
)

// cloud is an OpenAI-compatible cloud on 127.0.0.1, its API under /v1 and
// its key as a bearer token: Chat Completions answered, anything else
// refused, as the test sees.
func cloud(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+cloudKey {
			t.Errorf("the cloud was sent %s %s, Authorization %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
			http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		if !strings.Contains(string(body), `"model":"`+model+`"`) {
			t.Errorf("the cloud was sent %s", body)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the cloud."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":7,"completion_tokens":4,"total_tokens":11}}`, model)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTheProviderIsAModuleInTheProvidersNamespace: built in, the provider is
// listed where `caddy list-modules` lists the gateway's providers.
func TestTheProviderIsAModuleInTheProvidersNamespace(t *testing.T) {
	if _, err := caddy.GetModule(providers.Namespace + ".openai_compatible"); err != nil {
		t.Fatal(err)
	}
}

// TestAnSDKRequestReachesTheCloud: a gateway whose engine's provider is
// openai_compatible, loaded from a Caddyfile into Caddy, sends the OpenAI
// SDK's request to the cloud at its base URL with the engine's key, and the
// SDK reads the cloud's answer.
func TestAnSDKRequestReachesTheCloud(t *testing.T) {
	c := cloud(t)
	admin, port := freePort(t), freePort(t)
	tc := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: admin})
	tc.InitServer(fmt.Sprintf(`{
	skip_install_trust
	admin localhost:%d
	http_port %d
}
http://127.0.0.1:%d {
	llm_gateway {
		engine together {
			provider openai_compatible {
				base_url %s/v1
			}
			api_key %s
			models %s
		}
	}
}
`, admin, port, port, c.URL, cloudKey, model), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	client := openai.NewClient(option.WithBaseURL("http://127.0.0.1:"+strconv.Itoa(port)+"/v1/"),
		option.WithAPIKey("unused"), option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second))
	chat, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := chat.Choices[0].Message.Content; got != "Hello from the cloud." || chat.Usage.TotalTokens != 11 {
		t.Errorf("the SDK read %q, usage %+v", got, chat.Usage)
	}
}
