package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
)

// The prompt a pool's prefix index hashes (issue 25): the bytes of the
// request's conversation as the client sent them: Anthropic's "system"
// then "messages" for a chat; "prompt" or "input" otherwise. A client
// resends a conversation's earlier turns byte for byte, so the next turn's
// prompt starts with the blocks of the one before, which is what the
// engine's KV cache holds. The body's other members (model, stream,
// sampling) are left out: they do not change what the engine caches.

// maxPromptBlocks bounds the blocks hashed of one prompt (4 MiB at 256
// bytes): a body's size is bounded by max_body, its cost here by this.
const maxPromptBlocks = 1 << 14

// promptParts returns the parts of the request's body that make its prompt,
// and their length in bytes; nil for a body without one (a form).
func promptParts(req *request) ([][]byte, int) {
	if !req.json() {
		return nil, 0
	}
	b := req.body
	var parts [][]byte
	if m := req.fields.Messages; m.OK() {
		if sys := anthropicSystem(req); sys != nil {
			parts = append(parts, sys)
		}
		parts = append(parts, b[m.Value.Start:m.Value.End])
	} else {
		for _, name := range []string{"prompt", "input"} {
			if m, ok := jsonmember.LastMember(b, jsonmember.SkipSpace(b, 0), name); ok && m.OK() {
				parts = append(parts, b[m.Value.Start:m.Value.End])
				break
			}
		}
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return parts, n
}

// anthropicSystem is the "system" value of a Messages API request, nil for
// none. OpenAI's system prompt is a message; Anthropic's is a member of its
// own, looked for only there (it costs a walk of the body).
func anthropicSystem(req *request) []byte {
	if req.api != apierror.Anthropic {
		return nil
	}
	b := req.body
	if sys, ok := jsonmember.LastMember(b, jsonmember.SkipSpace(b, 0), "system"); ok && sys.OK() {
		return b[sys.Value.Start:sys.Value.End]
	}
	return nil
}

// promptBlocks returns the chained hashes of the whole blocks of the
// request's prompt. The share a member holds is counted in them: the tail
// shorter than a block is never in the index, so a turn is compared with
// what the index can know of the turn before.
func promptBlocks(req *request, block int) []uint64 {
	parts, n := promptParts(req)
	if n < block {
		return nil
	}
	if max := maxPromptBlocks * block; n > max {
		// only the head counts: past it, one more block barely moves the share
		parts, n = headOf(parts, max), max
	}
	return prefix.Blocks(make([]uint64, 0, n/block), block, parts...)
}

func headOf(parts [][]byte, n int) [][]byte {
	var out [][]byte
	for _, p := range parts {
		if n <= 0 {
			break
		}
		p = p[:min(len(p), n)]
		out, n = append(out, p), n-len(p)
	}
	return out
}
