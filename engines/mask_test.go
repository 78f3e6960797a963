package engines

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

// Passwords in URLs are masked, and only they: the scheme, the user, the
// host and the path stay readable, so an operator still sees which Redis or
// database an engine reached.
func TestMaskHidesPasswordsInURLs(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"connecting to redis://:hunter22@cache:6379/0", "connecting to redis://:****@cache:6379/0"},
		{"DATABASE_URL postgres://app:s3cr3t-pw@db.internal:5432/llm?sslmode=off", "DATABASE_URL postgres://app:****@db.internal:5432/llm?sslmode=off"},
		{`{"url": "rediss://default:pa@ss@redis.example:6380"}`, `{"url": "rediss://default:****@redis.example:6380"}`},
		{"two: amqp://u:one111@mq and https://x:two222@h/p", "two: amqp://u:****@mq and https://x:****@h/p"},
		// no password: nothing to mask
		{"git clone ssh://git@github.com/org/repo", "git clone ssh://git@github.com/org/repo"},
		{"listening on http://127.0.0.1:8080/v1 (user@host)", "listening on http://127.0.0.1:8080/v1 (user@host)"},
	} {
		if got := Mask(c.line, nil); got != c.want {
			t.Errorf("Mask(%q)\n got %q\nwant %q", c.line, got, c.want)
		}
	}
}

// The gateway's own key tokens are masked in every engine's output even
// printed bare, with nothing that looks like a credential around them; a
// config that goes away takes its tokens with it.
func TestMaskHidesRegisteredGatewaySecretsPrintedBare(t *testing.T) {
	const short, long = "team-key-0123", "team-key-0123-and-more"
	owner, other := new(int), new(int)
	RegisterSecrets(owner, []string{short, "abc"})
	RegisterSecrets(other, []string{long})
	defer UnregisterSecrets(other)

	got := Mask("request from team-key-0123-and-more, then team-key-0123; abc stays", nil)
	if want := "request from ****, then ****; abc stays"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// an engine's own buffer masks them too, though its config never named them
	b := lineBuffer{secrets: secretsOf(Config{APIKey: "engine-own-key-123"})}
	b.pump(strings.NewReader("headers: x-client team-key-0123 engine-own-key-123\n"), zap.NewNop(), "stdout")
	if got := b.last(1)[0]; got != "headers: x-client **** ****" {
		t.Fatalf("kept %q", got)
	}

	RegisterSecrets(owner, nil) // a reload that dropped the key
	if got := Mask("team-key-0123", nil); got != "team-key-0123" {
		t.Fatalf("a dropped key is still masked: %q", got)
	}
	UnregisterSecrets(owner)
	UnregisterSecrets(owner) // twice is harmless
	if got := Mask("x team-key-0123-and-more", nil); got != "x ****" {
		t.Fatalf("another owner's key lost its mask: %q", got)
	}
}
