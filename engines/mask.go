package engines

import (
	"regexp"
	"strings"
)

// Engines print their keys: llama-server echoes its command line with
// --api-key, a shell wrapper may log its environment, a cloud proxy its
// Authorization header. Every output line is masked once, before it is kept
// or logged, so the log, the admin API, start errors and the status page all
// show the same masked text.

// maskedValue replaces a secret.
const maskedValue = "****"

// minSecretLen keeps a short configured value ("1", "on") from masking
// every occurrence of itself.
const minSecretLen = 4

// keyLike matches values that look like credentials whatever their source;
// the first group (kept) is what introduces the value.
var keyLike = []*regexp.Regexp{
	// Authorization: Bearer abc…, Basic abc…
	regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{4,}`),
	// --api-key X, --api-key=X, -token X
	regexp.MustCompile(`(?i)((?:^|\s)--?[a-z0-9_-]*(?:api[_-]?key|token|secret|password|passwd)[= ]+["']?)[^\s"']+`),
	// api_key=X, "apiKey": "X", OPENAI_API_KEY=X, password: X
	regexp.MustCompile(`(?i)([a-z0-9_-]*(?:api[_-]?key|access[_-]?key|secret|token|password|passwd|authorization)["']?\s*[:=]\s*["']?)[^\s"',;&]{4,}`),
	// well-known token shapes: OpenAI/Anthropic sk-…, Hugging Face hf_…, Groq gsk_…, GitHub ghp_…, AWS AKIA…
	regexp.MustCompile(`()\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}|\b(?:hf|gsk|ghp|gho|xox[abp])_[A-Za-z0-9_-]{12,}|\bAKIA[0-9A-Z]{16}\b`),
}

// Mask returns line with every known secret and every key-like value
// replaced by "****".
func Mask(line string, secrets []string) string {
	for _, s := range secrets {
		if len(s) >= minSecretLen && strings.Contains(line, s) {
			line = strings.ReplaceAll(line, s, maskedValue)
		}
	}
	for _, re := range keyLike {
		line = re.ReplaceAllString(line, "${1}"+maskedValue)
	}
	return line
}

// secretsOf collects the values of an engine's definition that are secrets:
// its api_key, the argument after (or in) a key-like flag of its command,
// and key-like variables of its environment.
func secretsOf(c Config) []string {
	var out []string
	add := func(s string) {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	add(c.APIKey)
	for i, a := range c.Cmd {
		if !strings.HasPrefix(a, "-") || !secretName(a) {
			continue
		}
		if _, v, ok := strings.Cut(a, "="); ok {
			add(v)
		} else if i+1 < len(c.Cmd) {
			add(c.Cmd[i+1])
		}
	}
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && secretName(k) {
			add(v)
		}
	}
	return out
}

// secretName reports whether a flag or variable name says it holds a secret.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "token", "secret", "password", "passwd"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
