package prefix

import "github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

// The prompt an index hashes: the bytes of a request's
// conversation as the client sent them: Anthropic's "system" then
// "messages" for a chat; "prompt" or "input" otherwise. A client resends a
// conversation's earlier turns byte for byte, so the next turn's prompt
// starts with the blocks of the one before, which is what the engine's KV
// cache holds. The body's other members (model, stream, sampling) are left
// out: they do not change what the engine caches.

// MaxPromptBlocks bounds the blocks hashed of one prompt (4 MiB at 256
// bytes): a body's size is bounded by max_body, its cost here by this.
const MaxPromptBlocks = 1 << 14

// Prompt returns the chained hashes of the whole blocks of the prompt of a
// JSON request body whose "messages" member is messages (not OK for a body
// without one); anthropic says the body is a Messages API request, whose
// system prompt is a member of its own. The tail shorter than a block is
// never hashed, so a turn is compared with what an index can know of the
// turn before.
func Prompt(body []byte, messages jsonmember.Member, anthropic bool, block int) []uint64 {
	parts, n := promptParts(body, messages, anthropic)
	if n < block {
		return nil
	}
	if max := MaxPromptBlocks * block; n > max {
		// only the head counts: past it, one more block barely moves the share
		parts, n = headOf(parts, max), max
	}
	return Blocks(make([]uint64, 0, n/block), block, parts...)
}

// promptParts returns the parts of body that make its prompt, and their
// length in bytes.
func promptParts(b []byte, messages jsonmember.Member, anthropic bool) ([][]byte, int) {
	var parts [][]byte
	if messages.OK() {
		// OpenAI's system prompt is a message; Anthropic's is a member of
		// its own, looked for only there (it costs a walk of the body).
		if anthropic {
			if sys, ok := jsonmember.LastMember(b, jsonmember.SkipSpace(b, 0), "system"); ok && sys.OK() {
				parts = append(parts, b[sys.Value.Start:sys.Value.End])
			}
		}
		parts = append(parts, b[messages.Value.Start:messages.Value.End])
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
