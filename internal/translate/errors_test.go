package translate_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// anOpenAIError and anAnthropicError are the two families' error bodies
// as their SDKs read them.
type anOpenAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

type anAnthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anDecodeError[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return v
}

func TestErrorBodyTypesFollowTheStatus(t *testing.T) {
	for _, tc := range []struct {
		status             int
		anthropic          string
		openAI, openAICode string
	}{
		{400, "invalid_request_error", "invalid_request_error", ""},
		{401, "authentication_error", "authentication_error", "invalid_api_key"},
		{403, "permission_error", "permission_error", ""},
		{404, "not_found_error", "invalid_request_error", ""},
		{413, "request_too_large", "invalid_request_error", ""},
		{422, "invalid_request_error", "invalid_request_error", ""},
		{429, "rate_limit_error", "rate_limit_error", "rate_limit_exceeded"},
		{500, "api_error", "server_error", ""},
		{502, "api_error", "server_error", ""},
		{503, "overloaded_error", "server_error", "server_is_overloaded"},
		{529, "overloaded_error", "server_error", "server_is_overloaded"},
	} {
		a := anDecodeError[anAnthropicError](t, translate.ErrorBody(api.Chat, api.Messages, tc.status, []byte(`{"error":{"message":"m","type":"x","param":null,"code":null}}`)))
		translatetest.Eq(t, "Anthropic type of "+strconv.Itoa(tc.status), a.Error.Type, tc.anthropic)
		translatetest.Eq(t, "type", a.Type, "error")
		translatetest.Eq(t, "message", a.Error.Message, "m")
		for _, to := range []api.API{api.Chat, api.Responses} {
			o := anDecodeError[anOpenAIError](t, translate.ErrorBody(api.Messages, to, tc.status, []byte(`{"type":"error","error":{"type":"x","message":"m"}}`)))
			translatetest.Eq(t, "OpenAI type of "+strconv.Itoa(tc.status), o.Error.Type, tc.openAI)
			translatetest.Eq(t, "message", o.Error.Message, "m")
			code := ""
			if o.Error.Code != nil {
				code = *o.Error.Code
			}
			translatetest.Eq(t, "OpenAI code of "+strconv.Itoa(tc.status), code, tc.openAICode)
		}
	}
}

func TestErrorBodyKeepsTheMessage(t *testing.T) {
	huge := strings.Repeat("é", 5000) // two bytes a rune: a cut must not split one
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"OpenAI", `{"error":{"message":"model \"x\" not found","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, `model "x" not found`},
		{"Anthropic", `{"type":"error","error":{"type":"not_found_error","message":"model: x"},"request_id":"req_1"}`, "model: x"},
		{"string error", `{"error":"no such model"}`, "no such model"},
		{"vLLM", `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`, "The model does not exist."},
		{"FastAPI", `{"detail":"Not Found"}`, "Not Found"},
		{"FastAPI validation", `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, `[{"loc":["body","model"],"msg":"field required"}]`},
		{"plain text", "upstream connect error or disconnect/reset before headers\n", "upstream connect error or disconnect/reset before headers"},
		{"HTML", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", "502 Bad Gateway"},
		{"HTML without a title", `<!DOCTYPE html><html><body><script>x()</script><p>Service &amp; stuff   down</p></body></html>`, "Service & stuff down"},
		{"empty", ``, "engine answered Service Unavailable"},
		{"JSON without a message", `{}`, "{}"},
		{"huge", huge, strings.Repeat("é", 512) + "…"},
		{"not UTF-8", "bad \xff byte", "bad \uFFFD byte"},
	} {
		for _, c := range []struct{ from, to api.API }{{api.Chat, api.Messages}, {api.Messages, api.Chat}, {api.Responses, api.Messages}, {api.Messages, api.Responses}} {
			out := translate.ErrorBody(c.from, c.to, 503, []byte(tc.body))
			var msg string
			if c.to == api.Messages {
				msg = anDecodeError[anAnthropicError](t, out).Error.Message
			} else {
				msg = anDecodeError[anOpenAIError](t, out).Error.Message
			}
			translatetest.Eq(t, tc.name+" "+c.from.String()+"→"+c.to.String(), msg, tc.want)
			if len(msg) > translate.MaxErrorMessage+len("…") || !utf8.ValidString(msg) {
				t.Errorf("%s: message of %d bytes (valid UTF-8: %v)", tc.name, len(msg), utf8.ValidString(msg))
			}
		}
	}
}

func TestErrorBodyBetweenOpenAIsAPIsKeepsTheBody(t *testing.T) {
	const body = `{"error":{"message":"m","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	translatetest.Eq(t, "Chat→Responses", string(translate.ErrorBody(api.Chat, api.Responses, 429, []byte(body))), body)
	translatetest.Eq(t, "Responses→Chat", string(translate.ErrorBody(api.Responses, api.Chat, 429, []byte(body))), body)
	translatetest.Eq(t, "same API", string(translate.ErrorBody(api.Messages, api.Messages, 500, []byte("x"))), "x")
	// Text from an OpenAI engine still becomes OpenAI's shape.
	o := anDecodeError[anOpenAIError](t, translate.ErrorBody(api.Chat, api.Responses, 502, []byte("bad gateway")))
	translatetest.Eq(t, "message", o.Error.Message, "bad gateway")
	translatetest.Eq(t, "type", o.Error.Type, "server_error")
}
