package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// OpenAI's Responses: Codex's.
func init() {
	Register(api.Responses, &Codec{
		ReadRequest:  responsesReadRequest,
		WriteRequest: responsesWriteRequest,
		ReadAnswer:   responsesReadAnswer,
		WriteAnswer:  responsesWriteAnswer,
	})
}
