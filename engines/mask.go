package engines

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Engines print their keys: llama-server echoes its command line with
// --api-key, a shell wrapper may log its environment, a cloud proxy its
// Authorization header. Every output line is masked once, before it is kept
// or logged, so the log, the admin API, start errors and the status page all
// show the same masked text. What is masked: the engine's own secrets (its
// definition's, secretsOf), the secrets of whoever runs the engines (the
// gateway's key tokens, RegisterSecrets), passwords in URLs, and values that
// look like credentials wherever they come from.

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

// urlPassword matches the password of a URL's userinfo
// (redis://:pw@host, postgres://user:pw@host); the first group (the scheme
// and the user) is kept, and so is the host. The password runs to the last
// "@" of the authority, as a password with an unescaped "@" is written.
var urlPassword = regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/?#@"']*:)[^\s/?#"']+@`)

// Mask returns line with every known secret (secrets, and those registered
// with RegisterSecrets), every password in a URL and every key-like value
// replaced by "****".
func Mask(line string, secrets []string) string {
	line = MaskKnown(line, secrets)
	if !mayLookLikeKey(line) {
		return line
	}
	line = urlPassword.ReplaceAllString(line, "${1}"+maskedValue+"@")
	for _, re := range keyLike {
		line = re.ReplaceAllString(line, "${1}"+maskedValue)
	}
	return line
}

// MaskKnown returns s with every known secret (secrets, then those
// registered with RegisterSecrets) replaced by "****", and nothing else: for
// text whose shape a client reads, such as an engine's JSON error body,
// where a key-like pattern would take `"max_tokens": 5000}` for a key and
// eat its brace. Pass secrets longest first, so that a value holding a
// shorter one is masked whole.
func MaskKnown(s string, secrets []string) string {
	for _, list := range [][]string{secrets, registered()} {
		for _, secret := range list {
			if len(secret) >= minSecretLen && strings.Contains(s, secret) {
				s = strings.ReplaceAll(s, secret, maskedValue)
			}
		}
	}
	return s
}

// patternWords are, in lower case, words of which a line must hold one for
// urlPassword or a keyLike pattern to match it: a line with none is masked
// by the known secrets alone. The patterns cost about 7 µs a line (five
// case-insensitive, unanchored expressions); looking for the words about
// 0.2 µs (BenchmarkMaskHeaders), which lets a request's history record and
// span mask its User-Agent and X-Session-Id within the record's 2 µs.
// FuzzMaskWordsNeverSkipAMatch holds the list to the patterns.
var patternWords = []string{
	"://",             // urlPassword
	"bearer", "basic", // keyLike[0]
	"key", "token", "secret", // keyLike[1] and [2] (api key, access key: "key")
	"passw", "authorization", // password, passwd
	"sk-", "pk-", "rk-", "hf_", "gsk_", "ghp_", "gho_", "xox", "akia", // keyLike[3]
}

// mayLookLikeKey reports whether line holds one of patternWords, in any
// case, or any byte that is not ASCII: the patterns' (?i) folds Unicode too
// (the Kelvin sign matches "k", the long s "s"), so such a line is left to
// them.
func mayLookLikeKey(line string) bool {
	var buf [256]byte
	lower := buf[:0]
	if len(line) > len(buf) {
		lower = make([]byte, 0, len(line))
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c >= 0x80:
			return true
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	for _, w := range patternWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
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

// gatewaySecrets are secrets that no engine defines but every engine's output
// must hide: the gateway's own key tokens, which an engine prints bare when
// it logs a request's headers or a wrapper logs its environment. Each owner (a provisioned config) registers its own, so that a
// reload replaces them and Cleanup drops them; engines outlive configs, so
// they read the union at every line instead of holding a copy.
var gatewaySecrets struct {
	mu     sync.Mutex
	owners map[any][]string
	all    atomic.Pointer[[]string] // the union, longest first; read per line without mu
}

// RegisterSecrets sets the secrets that owner adds to every engine's mask,
// in place of those it registered before. Values shorter than four
// characters are ignored, as an engine's own are.
func RegisterSecrets(owner any, secrets []string) {
	gatewaySecrets.mu.Lock()
	defer gatewaySecrets.mu.Unlock()
	if gatewaySecrets.owners == nil {
		gatewaySecrets.owners = map[any][]string{}
	}
	gatewaySecrets.owners[owner] = slices.Clone(secrets)
	publishSecretsLocked()
}

// UnregisterSecrets drops what owner registered; it is safe to call for an
// owner that registered nothing.
func UnregisterSecrets(owner any) {
	gatewaySecrets.mu.Lock()
	defer gatewaySecrets.mu.Unlock()
	delete(gatewaySecrets.owners, owner)
	publishSecretsLocked()
}

// publishSecretsLocked rebuilds the union. Longest first, so that a token
// that holds a shorter one is masked whole, not around the shorter.
func publishSecretsLocked() {
	var all []string
	for _, list := range gatewaySecrets.owners {
		for _, s := range list {
			if len(s) >= minSecretLen && !slices.Contains(all, s) {
				all = append(all, s)
			}
		}
	}
	slices.SortFunc(all, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	gatewaySecrets.all.Store(&all)
}

// registered is the union of the registered secrets.
func registered() []string {
	if p := gatewaySecrets.all.Load(); p != nil {
		return *p
	}
	return nil
}
