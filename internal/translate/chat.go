package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// OpenAI's Chat Completions: the API most engines speak, and the one a
// translation prefers (api.Preference).
func init() {
	Register(api.Chat, &Codec{
		ReadRequest:  chatReadRequest,
		WriteRequest: chatWriteRequest,
		ReadAnswer:   chatReadAnswer,
		WriteAnswer:  chatWriteAnswer,
	})
}
