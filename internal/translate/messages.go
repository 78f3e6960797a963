package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// Anthropic's Messages: Claude Code's, and Anthropic's engines'.
func init() {
	Register(api.Messages, &Codec{
		ReadRequest:  messagesReadRequest,
		WriteRequest: messagesWriteRequest,
		ReadAnswer:   messagesReadAnswer,
		WriteAnswer:  messagesWriteAnswer,
	})
}
