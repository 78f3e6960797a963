package caddyfile

import (
	"os"
	"strings"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// checkTokensOnce refuses one token under two keys, at the line of the
// second, once the environment's placeholders are read: `key alice
// {env.ALICE}` and `key bob {env.BOB}` holding one value, or `keys` and a
// `key` giving one token. The handler's validation refuses the same when
// the config loads, but placeholders are compared only once resolved,
// inside Caddy's provisioning, where no line is known. at[i] is where
// keys[i] was given. Tokens are compared, never printed.
func checkTokensOnce(keys []hconfig.Key, at []pos) error {
	type first struct {
		key hconfig.Key
		at  pos
	}
	seen := map[string]first{}
	for i, k := range keys {
		v := envPlaceholder.ReplaceAllStringFunc(k.Value, func(m string) string {
			return os.Getenv(envPlaceholder.FindStringSubmatch(m)[1])
		})
		if strings.Contains(v, "{") {
			continue // another placeholder: the handler compares it when it loads
		}
		for _, tok := range hconfig.SplitKeys([]hconfig.Key{{Value: v}}) {
			if prev, ok := seen[tok.Value]; ok {
				return at[i].errf("one token is given twice, as %s (at %s) and as %s: its rules would depend on the order; give each a token of its own",
					tokenLabel(prev.key), prev.at, tokenLabel(k))
			}
			seen[tok.Value] = first{k, at[i]}
		}
	}
	return nil
}

func tokenLabel(k hconfig.Key) string {
	if k.Name == "" {
		return "an unnamed key (keys …)"
	}
	return "key " + k.Name
}
