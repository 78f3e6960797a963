package engines

import (
	"sync/atomic"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// What an engine speaks, learned (docs/translation.md#what-an-engine-speaks).
//
// An engine with no `api` line is taken to speak every API, as current
// llama-server, vLLM and ollama builds do; older builds of each answer
// only some of them, and say so with a 404 (or a 405) on the others'
// paths. The handler tells the engine when a native path answered that
// way (Learn); from then on the engine reads that API through translation
// (Reads) for as long as its process runs: a restart (a newer build under
// the same command) forgets what was learned. The gateway cannot see a
// remote engine's process restart: what it learned of one is kept until
// a reload changes the engine's definition (a new Engine).
//
// Beside the conversations' APIs, two routes can be learned missing:
// Messages' count_tokens (ollama answers Messages but not count_tokens)
// and /tokenize, the engine's own tokenizer that the gateway counts
// count_tokens with when the engine has no count_tokens of its own.
//
// The set is one word read without a lock: Reads runs for every candidate
// of every request.

// Unspoken is a set of native routes an engine answered it does not have.
type Unspoken uint32

// The routes beyond the APIs (whose bit is UnspokenAPI's).
const (
	UnspokenCountTokens Unspoken = 1 << 16 // POST /v1/messages/count_tokens
	UnspokenTokenize    Unspoken = 1 << 17 // POST /tokenize
)

// UnspokenAPI is the set of one API: its native path answered 404.
func UnspokenAPI(a api.API) Unspoken { return 1 << a }

// Has reports whether every route of r is in u.
func (u Unspoken) Has(r Unspoken) bool { return u&r == r }

// Names are the routes of u as the admin API and the page say them: the
// APIs' names, count_tokens and tokenize.
func (u Unspoken) Names() []string {
	var out []string
	for _, a := range api.Clients {
		if u.Has(UnspokenAPI(a)) {
			out = append(out, a.String())
		}
	}
	if u.Has(UnspokenCountTokens) {
		out = append(out, "count_tokens")
	}
	if u.Has(UnspokenTokenize) {
		out = append(out, "tokenize")
	}
	return out
}

// spoken is what an engine's process was learned not to speak.
type spoken struct{ unspoken atomic.Uint32 }

// Learn records that the engine's process answered r's native path with
// "no such route"; it reports whether that was news, so that the handler
// says it once.
func (e *Engine) Learn(r Unspoken) bool {
	for {
		old := e.spoken.unspoken.Load()
		if Unspoken(old).Has(r) {
			return false
		}
		if e.spoken.unspoken.CompareAndSwap(old, old|uint32(r)) {
			return true
		}
	}
}

// Unspoken is what the engine's process was learned not to speak.
func (e *Engine) Unspoken() Unspoken { return Unspoken(e.spoken.unspoken.Load()) }

// forgetSpoken forgets what was learned: a new process may speak more.
func (e *Engine) forgetSpoken() { e.spoken.unspoken.Store(0) }

// Reads is Config.Reads for the engine's process: the APIs its config says
// it speaks, but those it was learned not to.
func (e *Engine) Reads(a api.API) (api.API, bool) {
	u := e.Unspoken()
	if u == 0 {
		return e.cfg.Reads(a)
	}
	return e.cfg.reads(a, func(b api.API) bool { return e.cfg.Speaks(b) && !u.Has(UnspokenAPI(b)) })
}

// Speaks is Config.Speaks for the engine's process.
func (e *Engine) Speaks(a api.API) bool {
	return e.cfg.Speaks(a) && !e.Unspoken().Has(UnspokenAPI(a))
}
