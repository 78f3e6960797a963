// Package bedrock is the provider bedrock: AWS Bedrock's Converse API, POST
// /model/{model}/converse or /converse-stream, whose streamed answer is AWS's
// binary event stream (events.go). A request carries a Bedrock API key (the
// engine's api_key, as Authorization: Bearer) or is signed with SigV4
// (signing name "bedrock") by credentials from AWS's default chain: the
// environment, the shared config and credentials files and their profile,
// web identity (EKS's IRSA), the container's or the instance's role
// (docs/provider-bedrock.md). The Converse codec is here too
// (converse.go and its _request, _answer and _stream files): what
// translation reads and writes of Converse.
package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func init() {
	caddy.RegisterModule(new(Bedrock))
}

// Bedrock is the provider bedrock.
type Bedrock struct {
	// Region is the AWS region: the endpoint
	// bedrock-runtime.<region>.amazonaws.com and the SigV4 scope, which
	// names it whatever the engine's `to` is. Default: AWS_REGION, then
	// AWS_DEFAULT_REGION; required.
	Region string `json:"region,omitempty"`

	signer *v4.Signer
	mu     sync.Mutex
	creds  aws.CredentialsProvider // loaded at the first signed request, then cached and refreshed by the SDK
}

// CaddyModule returns the Caddy module information.
func (*Bedrock) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".bedrock",
		New: func() caddy.Module { return new(Bedrock) },
	}
}

// Provision fills in the region from the environment and resolves its
// placeholders ({env.NAME}).
func (p *Bedrock) Provision(caddy.Context) error {
	p.Region = p.region()
	return nil
}

// region is the configured region, else the environment's.
func (p *Bedrock) region() string {
	r := caddy.NewReplacer().ReplaceKnown(p.Region, "")
	if r == "" {
		r = os.Getenv("AWS_REGION")
	}
	if r == "" {
		r = os.Getenv("AWS_DEFAULT_REGION")
	}
	return r
}

// Name is "bedrock".
func (*Bedrock) Name() string { return "bedrock" }

// Where is the region.
func (p *Bedrock) Where() string { return p.region() }

// Engine gives the engine Converse and the region's endpoint; the region is
// required.
func (p *Bedrock) Engine(e *providers.Engine) error {
	region := p.region()
	if region == "" {
		return errors.New("provider bedrock needs its region (region us-east-1, or AWS_REGION)")
	}
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Converse.String()}
	}
	if e.To == "" {
		e.To = "https://bedrock-runtime." + region + ".amazonaws.com"
	}
	return nil
}

// Target names the model in the path. An inference profile's id
// (us.anthropic.claude-…-v2:0) or an ARN (arn:aws:bedrock:…/…) is one path
// segment: escaped as the SDK escapes it, ':' and '/' included, since the
// signature covers the escaped path.
func (p *Bedrock) Target(u *url.URL, r providers.Request) {
	op := "converse"
	if r.Stream {
		op = "converse-stream"
	}
	p.RouteTarget(u, r.Base, op, r.Model)
}

// ReadFailure reads a model's own failure (424: ModelErrorException, or
// ModelStreamErrorException, the model failed while it answered) as a 500
// is read: retry, move on, counted against the model. Bedrock's other
// exceptions have the statuses the table knows (429 ThrottlingException,
// 503 ServiceUnavailableException, 408 ModelTimeoutException, …).
func (*Bedrock) ReadFailure(f *providers.Failure) {
	if f.Status == http.StatusFailedDependency {
		f.Status = http.StatusInternalServerError
	}
}

// routes are Bedrock's model operations /upstream/ may pass, by name
// (/model/{model}/<name>, the model being the one the key may use). Async
// invocations, guardrails and the control plane's APIs name no model in
// their path: no route a key's models bound.
var routes = [...]string{"converse", "converse-stream", "invoke", "invoke-with-response-stream", "count-tokens"}

// Routes are the model operations.
func (*Bedrock) Routes() []string { return routes[:] }

// ReadRoute reads /model/{model}/<operation>.
func (*Bedrock) ReadRoute(tail string) (providers.Route, bool) {
	return providers.MethodRoute(tail, "/model/", "/", routes[:])
}

// RouteTarget sends an operation to /model/{model}/<operation>.
func (*Bedrock) RouteTarget(u, base *url.URL, name, model string) {
	u.Path = providers.JoinPath(base.Path, "/model/"+model+"/"+name)
	u.RawPath = providers.JoinPath(base.EscapedPath(), "/model/"+httpbinding.EscapePath(model, true)+"/"+name)
	u.RawQuery = base.RawQuery
}

// Authorize signs r with SigV4, unless it carries the engine's Bedrock API
// key already (Authorization: Bearer). Only the headers the signature needs
// are signed (host, content length and type, x-amz-*): a header a proxy
// adds, drops or rewrites on the way would otherwise void it.
func (p *Bedrock) Authorize(ctx context.Context, r *http.Request, body []byte) error {
	if r.Header.Get("Authorization") != "" {
		return nil
	}
	provider, err := p.credentials()
	if err != nil {
		return err
	}
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		// The SDK's errors name the source that failed, never a secret.
		return fmt.Errorf("bedrock: no AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	signed := &http.Request{Method: r.Method, URL: r.URL, Host: r.Host, Header: http.Header{}, ContentLength: int64(len(body))}
	for k, v := range r.Header {
		if k == "Content-Type" || strings.HasPrefix(k, "X-Amz-") {
			signed.Header[k] = v
		}
	}
	if err := p.signerOnce().SignHTTP(ctx, creds, signed, hex.EncodeToString(sum[:]), "bedrock", p.region(), time.Now()); err != nil {
		return fmt.Errorf("bedrock: signing the request: %w", err)
	}
	for _, k := range [...]string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := signed.Header.Get(k); v != "" {
			r.Header.Set(k, v)
		}
	}
	r.Host = signed.Host // the signer drops a default port from what it signs
	r.ContentLength = int64(len(body))
	return nil
}

// signerOnce is the engine's signer, made at its first signature.
func (p *Bedrock) signerOnce() *v4.Signer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.signer == nil {
		p.signer = v4.NewSigner()
	}
	return p.signer
}

// credentials loads AWS's default chain at the first request that needs
// it (an engine with an API key, or that is never used, never reads the
// environment's), then keeps it: it caches the credentials and renews
// them before they expire. A chain that fails to load (a profile that is
// not there) is tried again at the next request.
func (p *Bedrock) credentials() (aws.CredentialsProvider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.creds != nil {
		return p.creds, nil
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(p.region()))
	if err != nil {
		return nil, fmt.Errorf("bedrock: loading AWS's configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("bedrock: no AWS credentials configured")
	}
	p.creds = cfg.Credentials
	return p.creds, nil
}

// UnmarshalCaddyfile reads
//
//	provider bedrock {
//		region <region>
//	}
//
// whose line may also stand in the engine's block beside `provider
// bedrock` (EngineLines).
func (p *Bedrock) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the provider's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if err := p.UnmarshalEngineLine(d); err != nil {
			return err
		}
	}
	return nil
}

// EngineLines are the engine block's lines the provider takes.
func (*Bedrock) EngineLines() []string { return []string{"region"} }

// UnmarshalEngineLine reads `region <region>`.
func (p *Bedrock) UnmarshalEngineLine(d *caddyfile.Dispenser) error {
	if d.Val() != "region" {
		return d.Errf("provider bedrock takes region, not %q", d.Val())
	}
	if !d.AllArgs(&p.Region) {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var (
	_ providers.Provider      = (*Bedrock)(nil)
	_ providers.Authorizer    = (*Bedrock)(nil)
	_ providers.EventReader   = (*Bedrock)(nil)
	_ providers.Passer        = (*Bedrock)(nil)
	_ providers.Locator       = (*Bedrock)(nil)
	_ providers.FailureReader = (*Bedrock)(nil)
	_ caddy.Provisioner       = (*Bedrock)(nil)
	_ caddyfile.Unmarshaler   = (*Bedrock)(nil)
)
