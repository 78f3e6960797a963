package handler

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// The operation table of operation.go, row by row: what each path is, and
// what the rest of a request's path asks of it.
func TestEachPathIsOneOperation(t *testing.T) {
	for _, c := range []struct {
		path      string
		kind      pathKind
		op        operation
		family    string
		end       int
		usage, tr bool
		anthropic bool
	}{
		{"/v1/chat/completions", v1Path, opChat, "chat", grammar.EndFinish, true, true, false},
		{"/v1/completions", v1Path, opCompletion, "completions", grammar.EndFinish, true, false, false},
		{"/completions", extraPath, opCompletion, "completions", grammar.EndFinish, true, false, false},
		{"/completion", extraPath, opOther, "openai", grammar.EndConnection, false, false, false},
		{"/v1/embeddings", v1Path, opEmbeddings, "embeddings", grammar.EndConnection, false, false, false},
		{"/embedding", extraPath, opEmbeddings, "embeddings", grammar.EndConnection, false, false, false},
		{"/v1/responses", v1Path, opResponses, "responses", grammar.EndResponse, false, false, false},
		{"/v1/messages", v1Path, opMessages, "messages", grammar.EndMessage, false, true, true},
		{"/v1/messages/count_tokens", v1Path, opAnthropicOther, "messages", grammar.EndConnection, false, false, true},
		{"/v1/audio/transcriptions", v1Path, opUpload, "openai", grammar.EndConnection, false, false, false},
		{"/v1/images/edits", v1Path, opUpload, "openai", grammar.EndConnection, false, false, false},
		{"/v1/rerank", v1Path, opOther, "openai", grammar.EndConnection, false, false, false},
		{"/api/v1/chat/completions", extraPath, opChat, "chat", grammar.EndFinish, true, true, false},
		{"/openai/responses", extraPath, opResponses, "responses", grammar.EndResponse, false, false, false},
		{"/upstream/m/v1/chat/completions", passthroughPath, opPassthrough, "openai", grammar.EndConnection, false, false, false},
	} {
		op := operationOf(c.path, c.kind == passthroughPath)
		g := op.grammar()
		if op != c.op || op.family().String() != c.family || g.End != c.end || op.asksUsage() != c.usage ||
			op.transcribed() != c.tr || g.Anthropic != c.anthropic || (op.api() == apierror.Anthropic) != c.anthropic {
			t.Errorf("%s: operation %d, family %s, end %d, usage %v, transcript %v, anthropic %v", c.path, op, op.family(), g.End, op.asksUsage(), op.transcribed(), g.Anthropic)
		}
	}
}
