package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// Fakes of the cloud providers on 127.0.0.1, each speaking its provider's
// documented wire format and refusing what the provider refuses: a wrong
// path, a missing or wrong key, a bad signature, a member its API does not
// have. What a refusal says goes to the test as an error, so a request the
// gateway got wrong fails the test even when a fallback hides it.

// The secrets of the provider tests: none may show anywhere but on the
// wire to its own provider.
const (
	pvAnthropicKey = "sk-ant-api03-PVSECRET-anthropic-0001"
	pvGeminiKey    = "AIzaSyPVSECRET-gemini-key-0002"
	pvAzureKey     = "pvsecret0azure0key0000000000003"
	pvAWSKeyID     = "AKIAPVTESTKEYID00004"
	pvAWSSecret    = "pvSECRET/aws+secret+access+key/00005"
	pvAWSSession   = "pvSECRET-aws-session-token-00006"
)

var pvSecrets = []string{pvAnthropicKey, pvGeminiKey, pvAzureKey, pvAWSSecret, pvAWSSession}

// pvAWS are the Bedrock fake's credentials, in the region it serves.
var pvAWS = providertest.AWS{KeyID: pvAWSKeyID, Secret: pvAWSSecret, Session: pvAWSSession, Region: "us-east-1"}

// What the fakes answer, and the usage they report, so a test can tell
// each provider's answer and counts from another's.
const (
	bedrockText      = "Hello from Bedrock."
	geminiText       = "Hello from Gemini."
	azureText        = "Hello from Azure."
	anthropicText    = "Hello from Anthropic."
	bedrockIn        = 9
	bedrockOut       = 4
	geminiIn         = 8
	geminiOut        = 5
	azureIn          = 10
	azureOut         = 3
	bedrockModel     = "anthropic.claude-3-sonnet-20240229-v1:0"
	bedrockModelPath = "anthropic.claude-3-sonnet-20240229-v1%3A0" // as SigV4's canonical URI escapes it
	claudeModel      = "claude-3-5-sonnet-20241022"
	geminiModel      = "gemini-2.5-flash"
	azureDeployment  = "gpt-4o"
	azureAPIVersion  = "2024-10-21"
)

// In mode "cached" every fake answers as "ok" and reports the same large
// usage in its own words: 100,000 prompt tokens, of which 60,000 were read
// from the prompt cache and (where the provider says so: Anthropic,
// Bedrock) 10,000 written to it, and 2,000 out. Anthropic's and Bedrock's
// input counts leave the cache's tokens out; Gemini's and Azure's hold them.
const (
	cachedIn    = 100_000
	cachedRead  = 60_000
	cachedWrite = 10_000
	cachedOut   = 2_000
)

// pvEnv sets every provider test's secrets: the engines' keys (the
// Caddyfile reads them as {env.*}) and AWS's default chain's static
// credentials, with nothing else for the chain to find.
func pvEnv(t *testing.T) {
	t.Setenv("PV_ANTHROPIC_KEY", pvAnthropicKey)
	t.Setenv("PV_GEMINI_KEY", pvGeminiKey)
	t.Setenv("PV_AZURE_KEY", pvAzureKey)
	pvAWS.Env(t)
}

// pvRequest is what a fake was sent.
type pvRequest struct {
	path   string // escaped, as on the wire
	query  string
	header http.Header
	body   []byte
}

// pvFake is a provider's fake: a mode (ok, or a failure the provider
// answers), the requests it got, and what it refused.
type pvFake struct {
	*httptest.Server
	t    *testing.T
	mu   sync.Mutex
	mode string
	reqs []pvRequest
}

func newPVFake(t *testing.T, mode string, serve func(f *pvFake, w http.ResponseWriter, r *http.Request, body []byte)) *pvFake {
	t.Helper()
	f := &pvFake{t: t, mode: mode}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, pvRequest{r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		serve(f, w, r, body)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Listener = ln
	f.Start()
	t.Cleanup(f.Close)
	return f
}

func (f *pvFake) setMode(m string) {
	f.mu.Lock()
	f.mode = m
	f.mu.Unlock()
}

func (f *pvFake) getMode() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

func (f *pvFake) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func (f *pvFake) all() []pvRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pvRequest(nil), f.reqs...)
}

// refuse is a request the provider would refuse: the test fails.
func (f *pvFake) refuse(format string, args ...any) {
	f.t.Errorf("%s refused: %s", f.URL, fmt.Sprintf(format, args...))
}

func pvJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// ---- Anthropic ----

// anthropicFake is api.anthropic.com's Messages: x-api-key and
// anthropic-version required. Modes: ok, overloaded (529), rate_limited
// (429 with a retry-after too long to wait for).
func anthropicFake(t *testing.T, mode string) *pvFake {
	return newPVFake(t, mode, func(f *pvFake, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" {
			f.refuse("path %s", r.URL.Path)
			anthropicError(w, 404, "not_found_error", "Not Found")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			f.refuse("content type %q", ct)
			anthropicError(w, 400, "invalid_request_error", "Content-Type must be application/json")
			return
		}
		if r.Header.Get("X-Api-Key") != pvAnthropicKey || r.Header.Get("Authorization") != "" {
			f.refuse("x-api-key %q, Authorization %q", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
			anthropicError(w, 401, "authentication_error", "invalid x-api-key")
			return
		}
		var req messagesRequest
		if msg := checkMessages(r, body, &req); msg != "" {
			f.refuse("%s: %s", msg, body)
			anthropicError(w, 400, "invalid_request_error", msg)
			return
		}
		switch f.getMode() {
		case "overloaded":
			anthropicError(w, 529, "overloaded_error", "Overloaded")
			return
		case "rate_limited":
			w.Header().Set("Retry-After", "60")
			anthropicError(w, 429, "rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per minute.")
			return
		}
		in, out, cache := msgInputTokens, msgOutputTokens, ""
		if f.getMode() == "cached" {
			in, out = cachedIn-cachedRead-cachedWrite, cachedOut
			cache = fmt.Sprintf(`,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d`, cachedRead, cachedWrite)
		}
		if !req.Stream {
			pvJSON(w, 200, fmt.Sprintf(`{"id":"msg_01Pv","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d%s,"output_tokens":%d}}`,
				req.Model, anthropicText, in, cache, out))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
		ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01Pv","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d%s,"output_tokens":1}}}`, req.Model, in, cache))
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, anthropicText))
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, out))
		ev("message_stop", `{"type":"message_stop"}`)
	})
}

// ---- Bedrock ----

// converseMembers are the Converse request's members: Bedrock refuses any
// other ("extraneous key [x] is not permitted").
var converseMembers = []string{"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
	"additionalModelRequestFields", "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig"}

// bedrockFake is bedrock-runtime.us-east-1.amazonaws.com: every request's
// SigV4 signature recomputed with AWS's own signer and the test's
// credentials; Converse answered in JSON, ConverseStream in AWS's event
// stream frames written with AWS's own encoder. Modes: ok, throttled (429
// ThrottlingException), stream-throttled and stream-cut (a throttling
// exception in the stream before its first content, and after it).
func bedrockFake(t *testing.T, mode string) *pvFake {
	return newPVFake(t, mode, func(f *pvFake, w http.ResponseWriter, r *http.Request, body []byte) {
		amzError := func(status int, typ, msg string) {
			w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.Header().Set("X-Amzn-RequestId", "6f2a3c1e-0000-4000-8000-pvfake")
			pvJSON(w, status, fmt.Sprintf(`{"message":%q}`, msg))
		}
		if err := pvAWS.VerifySigV4(r, body, "bedrock"); err != nil {
			f.refuse("signature: %v", err)
			amzError(403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			f.refuse("content type %q", ct)
			amzError(415, "UnsupportedMediaTypeException", "Unsupported Media Type")
			return
		}
		stream := r.URL.EscapedPath() == "/model/"+bedrockModelPath+"/converse-stream"
		if !stream && r.URL.EscapedPath() != "/model/"+bedrockModelPath+"/converse" {
			f.refuse("path %s", r.URL.EscapedPath())
			amzError(404, "UnknownOperationException", "")
			return
		}
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Text *string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			f.refuse("body %s", body)
			amzError(400, "ValidationException", "Malformed input request, please reformat your input and try again.")
			return
		}
		if u := unknownMembers(body, converseMembers...); len(u) > 0 {
			f.refuse("members %v", u)
			amzError(400, "ValidationException", "Malformed input request: extraneous key ["+u[0]+"] is not permitted, please reformat your input and try again.")
			return
		}
		for i, m := range req.Messages {
			if m.Role != "user" && m.Role != "assistant" || len(m.Content) == 0 || m.Content[0].Text == nil {
				f.refuse("message %d: %s", i, body)
				amzError(400, "ValidationException", fmt.Sprintf("messages.%d: a role and content blocks", i))
				return
			}
		}
		if f.getMode() == "throttled" {
			amzError(429, "ThrottlingException", "Too many requests, please wait before trying again.")
			return
		}
		usage := fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d}`, bedrockIn, bedrockOut, bedrockIn+bedrockOut)
		if f.getMode() == "cached" {
			usage = fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d,"cacheReadInputTokens":%d,"cacheWriteInputTokens":%d}`,
				cachedIn-cachedRead-cachedWrite, cachedOut, cachedIn+cachedOut, cachedRead, cachedWrite)
		}
		if !stream {
			pvJSON(w, 200, fmt.Sprintf(`{"output":{"message":{"role":"assistant","content":[{"text":%q}]}},"stopReason":"end_turn","usage":%s,"metrics":{"latencyMs":412}}`,
				bedrockText, usage))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-RequestId", "6f2a3c1e-0000-4000-8000-pvfake")
		half := len(bedrockText) / 2
		// a stream that Bedrock throttles once it has begun: an exception
		// frame before the first content, or after some
		throttle := func() {
			w.Write(providertest.Frame(t, "exception", "throttlingException", `{"message":"Too many tokens, please wait before trying again."}`))
		}
		switch f.getMode() {
		case "stream-throttled":
			w.Write(providertest.Frame(t, "event", "messageStart", `{"p":"abcdefghijk","role":"assistant"}`))
			throttle()
			return
		case "stream-cut":
			w.Write(providertest.Frame(t, "event", "messageStart", `{"p":"abcdefghijk","role":"assistant"}`))
			w.Write(providertest.Frame(t, "event", "contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcd"}`, bedrockText[:half])))
			w.(http.Flusher).Flush()
			throttle()
			return
		}
		for _, ev := range [][2]string{
			{"messageStart", `{"p":"abcdefghijk","role":"assistant"}`},
			{"contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcd"}`, bedrockText[:half])},
			{"contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcdefgh"}`, bedrockText[half:])},
			{"contentBlockStop", `{"contentBlockIndex":0,"p":"ab"}`},
			{"messageStop", `{"p":"abcdef","stopReason":"end_turn"}`},
			{"metadata", fmt.Sprintf(`{"metrics":{"latencyMs":388},"p":"abc","usage":%s}`, usage)},
		} {
			w.Write(providertest.Frame(t, "event", ev[0], ev[1]))
			w.(http.Flusher).Flush()
		}
	})
}

// ---- Gemini ----

// geminiMembers are generateContent's request members: Google refuses any
// other (`Unknown name "x": Cannot find field.`).
var geminiMembers = []string{"contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig", "cachedContent"}

// geminiFake is generativelanguage.googleapis.com: the key in
// x-goog-api-key, the model and method in the path, SSE with alt=sse.
// Modes: ok, safety (a candidate stopped by the safety filter),
// exhausted (429 RESOURCE_EXHAUSTED).
func geminiFake(t *testing.T, mode string) *pvFake {
	return newPVFake(t, mode, func(f *pvFake, w http.ResponseWriter, r *http.Request, body []byte) {
		googleError := func(code int, status, msg string) {
			pvJSON(w, code, fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":%q}}`, code, msg, status))
		}
		base := "/v1beta/models/" + geminiModel
		stream := r.URL.Path == base+":streamGenerateContent"
		if !stream && r.URL.Path != base+":generateContent" || stream && r.URL.Query().Get("alt") != "sse" {
			f.refuse("path %s?%s", r.URL.Path, r.URL.RawQuery)
			googleError(404, "NOT_FOUND", "models/x is not found for API version v1beta, or is not supported for generateContent.")
			return
		}
		if r.Header.Get("X-Goog-Api-Key") != pvGeminiKey || r.Header.Get("Authorization") != "" || r.URL.Query().Get("key") != "" {
			f.refuse("x-goog-api-key %q, Authorization %q", r.Header.Get("X-Goog-Api-Key"), r.Header.Get("Authorization"))
			googleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
			return
		}
		var req struct {
			Contents []struct {
				Role  string `json:"role"`
				Parts []struct {
					Text *string `json:"text"`
				} `json:"parts"`
			} `json:"contents"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Contents) == 0 {
			f.refuse("body %s", body)
			googleError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
			return
		}
		if u := unknownMembers(body, geminiMembers...); len(u) > 0 {
			f.refuse("members %v", u)
			googleError(400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "`+u[0]+`": Cannot find field.`)
			return
		}
		for i, c := range req.Contents {
			if c.Role != "user" && c.Role != "model" || len(c.Parts) == 0 {
				f.refuse("contents[%d]: %s", i, body)
				googleError(400, "INVALID_ARGUMENT", "Please use a valid role: user, model.")
				return
			}
		}
		usage := fmt.Sprintf(`{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, geminiIn, geminiOut, geminiIn+geminiOut)
		promptIn := geminiIn
		if f.getMode() == "cached" {
			promptIn = cachedIn
			usage = fmt.Sprintf(`{"promptTokenCount":%d,"cachedContentTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, cachedIn, cachedRead, cachedOut, cachedIn+cachedOut)
		}
		switch f.getMode() {
		case "exhausted":
			googleError(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.")
			return
		case "safety":
			blocked := fmt.Sprintf(`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":%d,"totalTokenCount":%d},"modelVersion":%q,"responseId":"pvSafety"}`,
				geminiIn, geminiIn, geminiModel)
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: %s\r\n\r\n", blocked)
				return
			}
			pvJSON(w, 200, blocked)
			return
		}
		if !stream {
			pvJSON(w, 200, fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":%s,"modelVersion":%q,"responseId":"pvGemini"}`,
				geminiText, usage, geminiModel))
			return
		}
		// Google ends each event with CRLFs
		w.Header().Set("Content-Type", "text/event-stream")
		half := len(geminiText) / 2
		fmt.Fprintf(w, "data: %s\r\n\r\n", fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":%d,"totalTokenCount":%d},"modelVersion":%q,"responseId":"pvGemini"}`,
			geminiText[:half], promptIn, promptIn, geminiModel))
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: %s\r\n\r\n", fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":%s,"modelVersion":%q,"responseId":"pvGemini"}`,
			geminiText[half:], usage, geminiModel))
	})
}

// ---- Azure OpenAI ----

// azureFake is an Azure OpenAI resource's deployments API: the deployment
// in the path, api-version in the query, the key in api-key. Its streams
// open with a chunk of prompt filter results and no choices, as Azure's
// do. Modes: ok, filtered (400 content_filter), throttled (429 with
// retry-after).
func azureFake(t *testing.T, mode string) *pvFake {
	return newPVFake(t, mode, func(f *pvFake, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/openai/deployments/"+azureDeployment+"/chat/completions" {
			f.refuse("path %s", r.URL.Path)
			pvJSON(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
			return
		}
		if r.URL.Query().Get("api-version") != azureAPIVersion {
			f.refuse("query %s", r.URL.RawQuery)
			pvJSON(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
			return
		}
		if r.Header.Get("Api-Key") != pvAzureKey || r.Header.Get("Authorization") != "" {
			f.refuse("api-key %q, Authorization %q", r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
			pvJSON(w, 401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}`)
			return
		}
		var req chatRequest
		if msg := checkChat(body, &req); msg != "" {
			f.refuse("%s: %s", msg, body)
			openAIError(w, 400, "invalid_request_error", msg)
			return
		}
		switch f.getMode() {
		case "filtered":
			pvJSON(w, 400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"high"}}}}}`)
			return
		case "throttled":
			w.Header().Set("Retry-After", "30")
			pvJSON(w, 429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 30 seconds."}}`)
			return
		}
		filters := `"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`
		usage := fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, azureOut, azureIn, azureIn+azureOut)
		if f.getMode() == "cached" {
			usage = fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, cachedOut, cachedIn, cachedIn+cachedOut, cachedRead)
		}
		if !req.Stream {
			pvJSON(w, 200, fmt.Sprintf(`{"choices":[{%s,"finish_reason":"stop","index":0,"logprobs":null,"message":{"content":%q,"refusal":null,"role":"assistant"}}],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion","prompt_filter_results":[{"prompt_index":0,%s}],"system_fingerprint":"fp_pv","usage":%s}`,
				filters, azureText, filters, usage))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		data := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s) }
		data(fmt.Sprintf(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,%s}]}`, filters))
		chunk := func(delta, finish, u string) {
			data(fmt.Sprintf(`{"choices":[{"content_filter_results":{},"delta":%s,"finish_reason":%s,"index":0,"logprobs":null}],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_pv","usage":%s}`, delta, finish, u))
		}
		chunk(`{"content":"","refusal":null,"role":"assistant"}`, "null", "null")
		for _, word := range words(azureText) {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "null", "null")
		}
		chunk(`{}`, `"stop"`, "null")
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			data(fmt.Sprintf(`{"choices":[],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_pv","usage":%s}`, usage))
		}
		data("[DONE]")
	})
}
