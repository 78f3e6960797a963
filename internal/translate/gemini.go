package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// Google's generateContent (the Gemini API and Vertex AI): an engine's
// only, no client speaks it.
func init() {
	Register(api.Gemini, &Codec{
		WriteRequest: geminiWriteRequest,
		ReadAnswer:   geminiReadAnswer,
		ReadError:    geminiReadError,
	})
}
