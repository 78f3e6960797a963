package caddyfile

import (
	"fmt"
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The subdirectives of each block, for the suggestion that follows an
// unknown one (TestEveryListedSubdirectiveIsKnown keeps these lists honest).
var (
	handlerOptions = []string{"keys", "key", "issued_keys", "identity", "store", "max_body", "max_body_in_flight", "body_timeout", "wake", "keepalive", "body_fallbacks",
		"annotate_response", "list_aliases", "max_fallbacks", "max_attempts", "transport", "extra_paths", "passthrough",
		"defaults", "ui", "history", "pool", "engine", "memory_budget", "max_wait", "priority_grace", "translate", "price", "team", "budget_webhook"}
	engineOptions = []string{"to", "models", "model_name", "display_name", "description", "metadata", "unlisted", "api", "translate", "provider", "allow_media", "passthrough", "routes", "api_key", "cmd", "dir", "env", "ready",
		"wake", "group", "memory", "min_loaded", "evict", "start_timeout", "idle_timeout", "stop_timeout", "stop_cmd", "preload",
		"max_concurrent", "max_output_tokens", "queue", "dial_timeout", "header_timeout", "request_timeout",
		"first_token_timeout", "stream_idle_timeout", "fallback", "fallback_after", "fallback_model",
		"devices", "context_fallback", "retries", "resume", "loading_status", "prefill", "retry_after_max",
		"hangup_grace", "breaker", "transport", "set", "strip", "models_from", "health_interval",
		"health_path", "health_timeout", "health_passes", "health_fails", "signals", "signals_path", "signals_slots_path",
		"signals_interval", "signals_stale", "swap", "sleep_after", "slots", "hedge_after", "hedge_budget"}
	poolOptions        = []string{"member", "sticky", "failover", "breaker", "balance", "dynamic", "template", "hedge_after", "hedge_budget", "warm_spare", "prefer"}
	keyOptions         = []string{"models", "rate", "tokens", "spend", "team", "over_budget", "reserve", "priority", "operator", "hedge"}
	teamOptions        = []string{"rate", "tokens", "spend", "over_budget"}
	storeOptions       = []string{"password", "db", "prefix", "timeout"}
	issuedOptions      = []string{"secret", "max"}
	identityOptions    = []string{"groups", "user", "group", "default"}
	uiOptions          = []string{"keys", "recent"}
	historyOptions     = []string{"keep", "max_age", "memory"}
	passthroughOptions = []string{"methods", "budgets"}
)

// llamaSwapNames are llama-swap's names of options that have another name
// here: a user coming from it writes them first.
var llamaSwapNames = map[string]string{
	"ttl":                  "idle_timeout",
	"globalTTL":            "idle_timeout (in defaults)",
	"cmdStop":              "stop_cmd",
	"checkEndpoint":        "ready",
	"aliases":              "models",
	"proxy":                "to",
	"useModelName":         "model_name",
	"concurrencyLimit":     "max_concurrent",
	"healthCheckTimeout":   "start_timeout",
	"apiKeys":              "keys",
	"includeAliasesInList": "list_aliases",
	"name":                 "display_name",
}

// unknownSubdirective is the error for a subdirective that block (such as
// "engine qwen") does not know, with the nearest one it does.
func unknownSubdirective(d *cf.Dispenser, kind, block string, valid []string) error {
	msg := fmt.Sprintf("unknown %s subdirective %q", kind, d.Val())
	if block != "" {
		msg += " in " + block
	}
	return d.Errf("%s%s", msg, hint(d.Val(), kind, valid))
}

// hint says what the user may have meant by word, an unknown subdirective
// of a kind of block: the valid one nearest to it, the name here of a
// llama-swap option, or the block where the option belongs.
func hint(word, kind string, valid []string) string {
	if s, ok := llamaSwapNames[word]; ok {
		return fmt.Sprintf(" (llama-swap's %s is %s here)", word, s)
	}
	if s := nearest(word, valid); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	switch {
	case kind == "llm_gateway" && contains(engineOptions, word):
		return " (an engine option: write it in an engine block, or in defaults for every engine)"
	case kind == "engine" && contains(handlerOptions, word):
		return " (an option of the whole handler: write it in the llm_gateway block, outside the engines)"
	}
	return ""
}

// nearest is the name in valid closest to word: one that holds word whole
// (idle for idle_timeout) or is held in it, else the one fewest edits away
// if that is few for the word's length; "" when none is close.
func nearest(word string, valid []string) string {
	if len(word) >= 3 {
		for _, v := range valid {
			if strings.Contains(v, word) || strings.Contains(word, v) && len(v) >= 3 {
				return v
			}
		}
	}
	best, bestDist := "", 0
	for _, v := range valid {
		if dist := editDistance(word, v); best == "" || dist < bestDist {
			best, bestDist = v, dist
		}
	}
	if bestDist <= 2 || bestDist <= len(word)/3 {
		return best
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
