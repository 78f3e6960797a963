package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// Google's generateContent, as the Gemini API
// (https://ai.google.dev/api/generate-content) and Vertex AI
// (https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference)
// read it: the same request and answer, each at its own path and with its
// own credentials.

// What the Gemini and Vertex fakes answer, and the usage they report.
const (
	GeminiModel    = "gemini-2.5-flash"
	GeminiText     = "Hello from Gemini."
	GeminiIn       = 8
	GeminiOut      = 5
	VertexProject  = "proj"
	VertexLocation = "us-central1"
)

// geminiMembers are generateContent's request members: Google refuses any
// other (`Unknown name "x": Cannot find field.`).
var geminiMembers = []string{"contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig", "cachedContent"}

// Gemini is generativelanguage.googleapis.com: the key (GeminiKey) in
// x-goog-api-key, the model and method in the path, SSE with alt=sse.
// Modes: ok, cached, safety (a candidate stopped by the safety filter),
// exhausted (429 RESOURCE_EXHAUSTED).
func Gemini(t testing.TB, mode string) *Fake {
	return google(t, mode, GeminiKey, "/v1beta/models/"+GeminiModel, func(f *Fake, w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("X-Goog-Api-Key") != f.getKey() || r.Header.Get("Authorization") != "" || r.URL.Query().Get("key") != "" {
			f.refuse("x-goog-api-key %q, Authorization %q", r.Header.Get("X-Goog-Api-Key"), r.Header.Get("Authorization"))
			googleError(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
			return false
		}
		return true
	})
}

// Vertex is Vertex AI's generateContent for Google's GeminiModel in
// VertexProject at VertexLocation: an OAuth access token as Bearer
// (VertexToken until Fake.SetKey), the method in the path, SSE with
// alt=sse. Its modes are Gemini's.
func Vertex(t testing.TB, mode string) *Fake {
	base := "/v1/projects/" + VertexProject + "/locations/" + VertexLocation + "/publishers/google/models/" + GeminiModel
	return google(t, mode, VertexToken, base, func(f *Fake, w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+f.getKey() || r.URL.Query().Get("key") != "" {
			f.refuse("Authorization %q", r.Header.Get("Authorization"))
			googleError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
			return false
		}
		return true
	})
}

func googleError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":%q}}`, code, msg, status))
}

// google is a fake of generateContent for the model at base: the method in
// the path, then the credentials (authorized refuses them or not), then
// the request's members, then the fake's mode.
func google(t testing.TB, mode, key, base string, authorized func(f *Fake, w http.ResponseWriter, r *http.Request) bool) *Fake {
	return newFake(t, mode, key, func(f *Fake, w http.ResponseWriter, r *http.Request, body []byte) {
		generateContent(f, w, r, body, base, authorized)
	})
}

func generateContent(f *Fake, w http.ResponseWriter, r *http.Request, body []byte, base string, authorized func(f *Fake, w http.ResponseWriter, r *http.Request) bool) {
	stream := r.URL.Path == base+":streamGenerateContent"
	if !stream && r.URL.Path != base+":generateContent" || stream && r.URL.Query().Get("alt") != "sse" {
		f.refuse("path %s?%s", r.URL.Path, r.URL.RawQuery)
		googleError(w, 404, "NOT_FOUND", "models/x is not found for API version v1beta, or is not supported for generateContent.")
		return
	}
	if !authorized(f, w, r) {
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
		googleError(w, 400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	if u := UnknownMembers(body, geminiMembers...); len(u) > 0 {
		f.refuse("members %v", u)
		googleError(w, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "`+u[0]+`": Cannot find field.`)
		return
	}
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" || len(c.Parts) == 0 {
			f.refuse("contents[%d]: %s", i, body)
			googleError(w, 400, "INVALID_ARGUMENT", "Please use a valid role: user, model.")
			return
		}
	}
	usage := fmt.Sprintf(`{"promptTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, GeminiIn, GeminiOut, GeminiIn+GeminiOut)
	promptIn := GeminiIn
	if f.Mode() == "cached" {
		promptIn = cachedIn
		usage = fmt.Sprintf(`{"promptTokenCount":%d,"cachedContentTokenCount":%d,"candidatesTokenCount":%d,"totalTokenCount":%d}`, cachedIn, cachedRead, cachedOut, cachedIn+cachedOut)
	}
	switch f.Mode() {
	case "exhausted":
		googleError(w, 429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.")
		return
	case "safety":
		blocked := fmt.Sprintf(`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":%d,"totalTokenCount":%d},"modelVersion":%q,"responseId":"pvSafety"}`,
			GeminiIn, GeminiIn, GeminiModel)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\r\n\r\n", blocked)
			return
		}
		writeJSON(w, 200, blocked)
		return
	}
	if !stream {
		writeJSON(w, 200, fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":%s,"modelVersion":%q,"responseId":"pvGemini"}`,
			GeminiText, usage, GeminiModel))
		return
	}
	// Google ends each event with CRLFs
	w.Header().Set("Content-Type", "text/event-stream")
	half := len(GeminiText) / 2
	fmt.Fprintf(w, "data: %s\r\n\r\n", fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":%d,"totalTokenCount":%d},"modelVersion":%q,"responseId":"pvGemini"}`,
		GeminiText[:half], promptIn, promptIn, GeminiModel))
	w.(http.Flusher).Flush()
	fmt.Fprintf(w, "data: %s\r\n\r\n", fmt.Sprintf(`{"candidates":[{"content":{"parts":[{"text":%q}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":%s,"modelVersion":%q,"responseId":"pvGemini"}`,
		GeminiText[half:], usage, GeminiModel))
}
