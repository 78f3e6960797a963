package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// What the Bedrock fake answers, and the usage it reports.
const (
	BedrockModel     = "anthropic.claude-3-sonnet-20240229-v1:0"
	BedrockModelPath = "anthropic.claude-3-sonnet-20240229-v1%3A0" // as SigV4's canonical URI escapes it
	BedrockText      = "Hello from Bedrock."
	BedrockIn        = 9
	BedrockOut       = 4
)

// converseMembers are the Converse request's members: Bedrock refuses any
// other ("extraneous key [x] is not permitted").
var converseMembers = []string{"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
	"additionalModelRequestFields", "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig"}

// Bedrock is bedrock-runtime.us-east-1.amazonaws.com: every request's
// SigV4 signature recomputed with AWS's own signer and the test's
// credentials (AWSKeys); Converse answered in JSON, ConverseStream in AWS's event
// stream frames written with AWS's own encoder. Modes: ok, cached, throttled (429
// ThrottlingException), stream-throttled and stream-cut (a throttling
// exception in the stream before its first content, and after it).
func Bedrock(t testing.TB, mode string) *Fake {
	return newFake(t, mode, "", func(f *Fake, w http.ResponseWriter, r *http.Request, body []byte) {
		amzError := func(status int, typ, msg string) {
			w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.Header().Set("X-Amzn-RequestId", "6f2a3c1e-0000-4000-8000-pvfake")
			writeJSON(w, status, fmt.Sprintf(`{"message":%q}`, msg))
		}
		if err := AWSKeys.VerifySigV4(r, body, "bedrock"); err != nil {
			f.refuse("signature: %v", err)
			amzError(403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			f.refuse("content type %q", ct)
			amzError(415, "UnsupportedMediaTypeException", "Unsupported Media Type")
			return
		}
		stream := r.URL.EscapedPath() == "/model/"+BedrockModelPath+"/converse-stream"
		if !stream && r.URL.EscapedPath() != "/model/"+BedrockModelPath+"/converse" {
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
		if u := UnknownMembers(body, converseMembers...); len(u) > 0 {
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
		if f.Mode() == "throttled" {
			amzError(429, "ThrottlingException", "Too many requests, please wait before trying again.")
			return
		}
		usage := fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d}`, BedrockIn, BedrockOut, BedrockIn+BedrockOut)
		if f.Mode() == "cached" {
			usage = fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d,"cacheReadInputTokens":%d,"cacheWriteInputTokens":%d}`,
				cachedIn-cachedRead-cachedWrite, cachedOut, cachedIn+cachedOut, cachedRead, cachedWrite)
		}
		if !stream {
			writeJSON(w, 200, fmt.Sprintf(`{"output":{"message":{"role":"assistant","content":[{"text":%q}]}},"stopReason":"end_turn","usage":%s,"metrics":{"latencyMs":412}}`,
				BedrockText, usage))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-RequestId", "6f2a3c1e-0000-4000-8000-pvfake")
		half := len(BedrockText) / 2
		// a stream that Bedrock throttles once it has begun: an exception
		// frame before the first content, or after some
		throttle := func() {
			w.Write(Frame(f.t, "exception", "throttlingException", `{"message":"Too many tokens, please wait before trying again."}`))
		}
		switch f.Mode() {
		case "stream-throttled":
			w.Write(Frame(f.t, "event", "messageStart", `{"p":"abcdefghijk","role":"assistant"}`))
			throttle()
			return
		case "stream-cut":
			w.Write(Frame(f.t, "event", "messageStart", `{"p":"abcdefghijk","role":"assistant"}`))
			w.Write(Frame(f.t, "event", "contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcd"}`, BedrockText[:half])))
			w.(http.Flusher).Flush()
			throttle()
			return
		}
		for _, ev := range [][2]string{
			{"messageStart", `{"p":"abcdefghijk","role":"assistant"}`},
			{"contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcd"}`, BedrockText[:half])},
			{"contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":0,"delta":{"text":%q},"p":"abcdefgh"}`, BedrockText[half:])},
			{"contentBlockStop", `{"contentBlockIndex":0,"p":"ab"}`},
			{"messageStop", `{"p":"abcdef","stopReason":"end_turn"}`},
			{"metadata", fmt.Sprintf(`{"metrics":{"latencyMs":388},"p":"abc","usage":%s}`, usage)},
		} {
			w.Write(Frame(f.t, "event", ev[0], ev[1]))
			w.(http.Flusher).Flush()
		}
	})
}
