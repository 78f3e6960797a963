package providertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Bedrock's pieces: a SigV4 signature recomputed with AWS's own signer
// (VerifySigV4), AWS's event stream frames written with AWS's own encoder
// (Frame), and AWS's default credential chain given the test's credentials
// and nothing else (AWS.Env). They follow the Converse API reference
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
// and API_runtime_ConverseStream.html beside it), SigV4's
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html),
// and aws-sdk-go-v2's service/bedrockruntime, whose own decoder reads what
// Frame writes (providers/bedrock's TestBedrockFakeIsAWSFormat).

// AWS is a test's AWS credentials and the region its requests are signed
// for.
type AWS struct {
	KeyID, Secret, Session string
	Region                 string
}

// Env leaves AWS's default chain c's credentials (none when c's are empty)
// in the environment and nothing else to find: no profile or shared files,
// no web identity, no container or instance role. The region is set when c
// names one.
func (c AWS) Env(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", c.KeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", c.Secret)
	t.Setenv("AWS_SESSION_TOKEN", c.Session)
	if c.Region != "" {
		t.Setenv("AWS_REGION", c.Region)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ACCESS_KEY", "AWS_SECRET_KEY"} {
		t.Setenv(k, "")
	}
	none := t.TempDir() + "/nonexistent"
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// VerifySigV4 signs r again, as it arrived, with AWS's signer and c's
// credentials, for service in c's region: the headers it says it signed,
// its time (within AWS's five minutes), its payload's hash. The signature
// must be the same, and the session token sent.
func (c AWS) VerifySigV4(r *http.Request, body []byte, service string) error {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return errors.New("no SigV4 Authorization")
	}
	fields := map[string]string{}
	for _, f := range strings.Split(auth[len(algo):], ", ") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	scope := "/" + c.Region + "/" + service + "/aws4_request"
	if !strings.HasPrefix(fields["Credential"], c.KeyID+"/") || !strings.HasSuffix(fields["Credential"], scope) {
		return errors.New("scope " + fields["Credential"])
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return err
	}
	if d := time.Since(when); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("signed %s ago", d)
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	again.ContentLength = int64(len(body))
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	again.Header.Del("X-Amz-Date")
	again.Header.Del("X-Amz-Security-Token")
	sum := sha256.Sum256(body)
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != hex.EncodeToString(sum[:]) {
		return errors.New("x-amz-content-sha256 is not the body's")
	}
	creds := aws.Credentials{AccessKeyID: c.KeyID, SecretAccessKey: c.Secret, SessionToken: c.Session}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), service, c.Region, when); err != nil {
		return err
	}
	if got, want := auth, again.Header.Get("Authorization"); got != want {
		return errors.New("signature differs:\n got " + got + "\nwant " + want)
	}
	if r.Header.Get("X-Amz-Security-Token") != c.Session {
		return errors.New("no session token")
	}
	return nil
}

// Frame is one frame of AWS's event stream, by AWS's own encoder: an event
// (kind "event") of type typ, or an exception (kind "exception") of type
// typ, its payload JSON.
func Frame(t testing.TB, kind, typ, payload string) []byte {
	t.Helper()
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue(kind))
	if kind == "exception" {
		h.Set(":exception-type", eventstream.StringValue(typ))
	} else {
		h.Set(":event-type", eventstream.StringValue(typ))
	}
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		t.Error(err)
	}
	return b.Bytes()
}
