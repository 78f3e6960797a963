package translate

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
)

// conversations are the three APIs a client speaks a conversation in.
var conversations = [...]api.API{api.Chat, api.Messages, api.Responses}
