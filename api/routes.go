package api

import "slices"

// Routes by name (issue 51; docs/keys.md#what-each-route-checks). Each API
// lists the routes under /v1/ it serves, and a path that is none of them is
// no API's route: it reaches an engine only where the operator's `routes`
// line names it for that engine, and then for keys without rules only. A
// request was relayed by its prefix before: any POST under /v1/ reached an
// engine that speaks OpenAI's API, so a key allowed one model ran a
// fine-tuning job with the operator's OpenAI key, and /v1/messages/batches
// reached Anthropic with another model inside its body. The routes that
// belong to a whole account, not a model (files, batches, fine-tuning,
// assistants, vector stores, message batches), are none of these: their
// bodies name no model a key's models bound, or name it where the gateway
// does not read it.
var routes = map[string]API{
	"/v1/chat/completions":      Chat,
	"/v1/completions":           Completions,
	"/v1/responses":             Responses,
	"/v1/messages":              Messages,
	"/v1/messages/count_tokens": Messages,
	"/v1/embeddings":            Embeddings,
	// OpenAI's other routes whose body names the model, relayed unread
	"/v1/audio/transcriptions": Other,
	"/v1/audio/translations":   Other,
	"/v1/audio/speech":         Other,
	"/v1/images/generations":   Other,
	"/v1/images/edits":         Other,
	"/v1/images/variations":    Other,
	"/v1/moderations":          Other,
	"/v1/rerank":               Other, // llama-server, vLLM, Infinity
	"/v1/score":                Other, // vLLM
}

// RouteOf is the API whose route the path p (under /v1/) is, and whether
// it is one.
func RouteOf(p string) (API, bool) {
	a, ok := routes[p]
	return a, ok
}

// Routes are the routes under /v1/ the API serves, sorted.
func Routes(a API) []string {
	var out []string
	for p, b := range routes {
		if a == b {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
