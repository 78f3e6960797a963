package providertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// caught is a test whose errors are kept, to see what a fake refused.
type caught struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (c *caught) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *caught) refusals() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// sign signs r for Bedrock as AWS's SDK does, with secret as the AWS
// secret.
func sign(t *testing.T, r *http.Request, body, secret string) {
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: AWSKeys.KeyID, SecretAccessKey: secret, SessionToken: AWSKeys.Session}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "bedrock", AWSKeys.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// Each fake answers a request its provider takes, and refuses one with a
// wrong key: the refusal reaches the test as an error, and the answer is
// the provider's own status.
func TestEachFakeRefusesAWrongKey(t *testing.T) {
	messages := `{"model":"` + ClaudeModel + `","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}`
	contents := `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`
	converse := `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		name       string
		fake       func(testing.TB, string) *Fake
		path, body string
		key        func(t *testing.T, r *http.Request, key string) // puts the key where the provider reads it
		good       string
		refused    int // the provider's status for a wrong key
	}{
		{"anthropic", Anthropic, "/v1/messages", messages, func(_ *testing.T, r *http.Request, k string) {
			r.Header.Set("X-Api-Key", k)
			r.Header.Set("Anthropic-Version", "2023-06-01")
		}, AnthropicKey, 401},
		{"gemini", Gemini, "/v1beta/models/" + GeminiModel + ":generateContent", contents,
			func(_ *testing.T, r *http.Request, k string) { r.Header.Set("X-Goog-Api-Key", k) }, GeminiKey, 400},
		{"vertex", Vertex, "/v1/projects/" + VertexProject + "/locations/" + VertexLocation + "/publishers/google/models/" + GeminiModel + ":generateContent", contents,
			func(_ *testing.T, r *http.Request, k string) { r.Header.Set("Authorization", "Bearer "+k) }, VertexToken, 401},
		{"bedrock", Bedrock, "/model/" + BedrockModelPath + "/converse", converse,
			func(t *testing.T, r *http.Request, k string) { sign(t, r, converse, k) }, AWSKeys.Secret, 403},
		{"azure", Azure, "/openai/deployments/" + AzureDeployment + "/chat/completions?api-version=" + AzureAPIVersion, chat,
			func(_ *testing.T, r *http.Request, k string) { r.Header.Set("Api-Key", k) }, AzureKey, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := &caught{TB: t}
			f := c.fake(ct, "ok")
			for _, key := range []string{c.good, "wrong-key"} {
				req, _ := http.NewRequest(http.MethodPost, f.URL+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				c.key(t, req, key)
				resp, err := f.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if want := map[bool]int{true: 200, false: c.refused}[key == c.good]; resp.StatusCode != want {
					t.Errorf("key %s: %s, want %d", key, resp.Status, want)
				}
			}
			if r := ct.refusals(); len(r) != 1 || !strings.Contains(r[0], "refused") || f.N() != 2 {
				t.Errorf("refusals %q after %d requests, want the wrong key's only", r, f.N())
			}
		})
	}
}
