package handler

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The operation table of operation.go, row by row: what each path is, and
// what the rest of a request's path asks of it.
func TestEachPathIsOneOperation(t *testing.T) {
	for _, c := range []struct {
		path      string
		kind      pathKind
		op        operation
		api       string
		end       api.End
		usage, tr bool
		anthropic bool
	}{
		{"/v1/chat/completions", v1Path, opChat, "chat", api.EndFinish, true, true, false},
		{"/v1/completions", v1Path, opCompletion, "completions", api.EndFinish, true, false, false},
		{"/completions", extraPath, opCompletion, "completions", api.EndFinish, true, false, false},
		{"/completion", extraPath, opOther, "openai", api.EndConnection, false, false, false},
		{"/v1/embeddings", v1Path, opEmbeddings, "embeddings", api.EndConnection, false, false, false},
		{"/embedding", extraPath, opEmbeddings, "embeddings", api.EndConnection, false, false, false},
		{"/v1/responses", v1Path, opResponses, "responses", api.EndResponse, false, false, false},
		{"/v1/messages", v1Path, opMessages, "messages", api.EndMessage, false, true, true},
		{"/v1/messages/count_tokens", v1Path, opCountTokens, "messages", api.EndConnection, false, false, true},
		{"/v1/messages/batches", v1Path, opAnthropicOther, "messages", api.EndConnection, false, false, true},
		{"/v1/audio/transcriptions", v1Path, opUpload, "openai", api.EndConnection, false, false, false},
		{"/v1/images/edits", v1Path, opUpload, "openai", api.EndConnection, false, false, false},
		{"/v1/rerank", v1Path, opOther, "openai", api.EndConnection, false, false, false},
		{"/v1/fine_tuning/jobs", v1Path, opOther, "openai", api.EndConnection, false, false, false},
		{"/v1/x/chat/completions", v1Path, opOther, "openai", api.EndConnection, false, false, false}, // under /v1/, by name only
		{"/api/v1/chat/completions", extraPath, opChat, "chat", api.EndFinish, true, true, false},
		{"/openai/responses", extraPath, opResponses, "responses", api.EndResponse, false, false, false},
		{"/upstream/m/v1/chat/completions", passthroughPath, opPassthrough, "openai", api.EndConnection, false, false, false},
	} {
		op := operationOf(c.path, c.kind == passthroughPath)
		g := op.grammar()
		anthropic := op.api().Errors() == api.AnthropicErrors
		if op != c.op || op.api().String() != c.api || g.API.End() != c.end || op.asksUsage() != c.usage ||
			op.transcribed() != c.tr || anthropic != c.anthropic {
			t.Errorf("%s: operation %d, API %s, end %d, usage %v, transcript %v, anthropic %v", c.path, op, op.api(), g.API.End(), op.asksUsage(), op.transcribed(), anthropic)
		}
	}
}
