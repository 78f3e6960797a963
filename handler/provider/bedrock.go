package provider

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// bedrock is AWS Bedrock's Converse API: POST /model/{model}/converse, or
// /converse-stream, whose answer is AWS's binary event stream. A request
// carries a Bedrock API key (api_key: Authorization: Bearer, set before
// Authorize) or is signed with SigV4 (signing name "bedrock") by
// credentials from AWS's default chain: the environment, the shared
// config and credentials files and their profile, web identity (EKS's
// IRSA), the container's or the instance's role.
type bedrock struct {
	region string
	keyed  bool
	signer *v4.Signer

	mu    sync.Mutex
	creds aws.CredentialsProvider // loaded at the first request, then cached and refreshed by the SDK
}

func newBedrock(cfg *engines.Config) (Provider, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("engine %s: provider bedrock needs its region", cfg.Name)
	}
	return &bedrock{region: cfg.Region, keyed: cfg.APIKey != "", signer: v4.NewSigner()}, nil
}

// Target names the model in the path. An inference profile's id
// (us.anthropic.claude-…-v2:0) or an ARN (arn:aws:bedrock:…/…) is one
// path segment: escaped as the SDK escapes it, ':' and '/' included,
// since the signature covers the escaped path.
func (p *bedrock) Target(u, base *url.URL, _ api.API, _, model string, stream bool) {
	op := "converse"
	if stream {
		op = "converse-stream"
	}
	p.RouteTarget(u, base, op, model)
}

// bedrockRoutes are Bedrock's model operations /upstream/ may pass, by
// name (/model/{model}/<name>, the model being the one the key may use).
// Async invocations, guardrails and the control plane's APIs name no model
// in their path: no route a key's models bound.
var bedrockRoutes = [...]string{"converse", "converse-stream", "invoke", "invoke-with-response-stream", "count-tokens"}

func (*bedrock) Routes() []string { return bedrockRoutes[:] }

func (*bedrock) ReadRoute(tail string) (Route, bool) {
	return methodRoute(tail, "/model/", "/", bedrockRoutes[:])
}

func (*bedrock) RouteTarget(u, base *url.URL, name, model string) {
	u.Path = joinPath(base.Path, "/model/"+model+"/"+name)
	u.RawPath = joinPath(base.EscapedPath(), "/model/"+httpbinding.EscapePath(model, true)+"/"+name)
	u.RawQuery = base.RawQuery
}

// Authorize signs r with SigV4, unless the engine has an API key (sent
// already as Authorization: Bearer). Only the headers the signature needs
// are signed (host, content length and type, x-amz-*): a header a proxy
// adds, drops or rewrites on the way would otherwise void it.
func (p *bedrock) Authorize(ctx context.Context, r *http.Request, body []byte) error {
	if p.keyed {
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
	if err := p.signer.SignHTTP(ctx, creds, signed, hex.EncodeToString(sum[:]), "bedrock", p.region, time.Now()); err != nil {
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

// credentials loads AWS's default chain at the first request that needs
// it (an engine with an API key, or that is never used, never reads the
// environment's), then keeps it: it caches the credentials and renews
// them before they expire. A chain that fails to load (a profile that is
// not there) is tried again at the next request.
func (p *bedrock) credentials() (aws.CredentialsProvider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.creds != nil {
		return p.creds, nil
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(p.region))
	if err != nil {
		return nil, fmt.Errorf("bedrock: loading AWS's configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("bedrock: no AWS credentials configured")
	}
	p.creds = cfg.Credentials
	return p.creds, nil
}

// Events reads a ConverseStream answer (application/vnd.amazon.eventstream)
// as SSE events; any other body (an error's JSON) is left as it is.
func (p *bedrock) Events(h http.Header, body io.ReadCloser) io.ReadCloser {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "application/vnd.amazon.eventstream" {
		return body
	}
	h.Set("Content-Type", "text/event-stream")
	h.Del("Content-Length")
	return &eventStream{body: body, r: bufio.NewReader(body), dec: eventstream.NewDecoder()}
}

// eventStream turns AWS's event stream into SSE, frame by frame: each
// frame is one event, "event: <type>\ndata: <JSON payload>\n\n", named by
// its :event-type, or by its :exception-type for an exception. A frame
// whose checksum fails, or that the body cuts short, is a read error: the
// gateway then cuts the client's stream rather than pass on a guess.
type eventStream struct {
	body    io.ReadCloser
	r       *bufio.Reader
	dec     *eventstream.Decoder
	payload []byte // the decoder's buffer, reused frame after frame
	out     []byte
	off     int
	err     error
}

func (e *eventStream) Read(p []byte) (int, error) {
	for e.off == len(e.out) {
		if e.err != nil {
			return 0, e.err
		}
		e.out, e.off = e.out[:0], 0
		e.err = e.next()
	}
	n := copy(p, e.out[e.off:])
	e.off += n
	return n, nil
}

// maxFrame bounds one frame of the event stream, read from its prelude
// before any of it is buffered: it becomes one SSE event, which is at most
// sse.MaxEventSize after it (the gateway cuts a larger one), and AWS's
// decoder reads a frame's payload whole, growing a buffer as it goes, for
// up to the 16 MiB its format allows (issue 51: a 15 MB frame cost ~10 MB
// per stream before the cut). Bedrock's own events are a few hundred bytes.
const maxFrame = sse.MaxEventSize

// ErrFrameTooLarge cuts an event stream whose frame says it is over maxFrame.
var ErrFrameTooLarge = errors.New("a frame larger than 1 MiB, the cap of one event")

// next decodes one frame into e.out.
func (e *eventStream) next() error {
	// The prelude's first 4 bytes are the frame's total length, big-endian
	// (its checksum comes later: a length that lies is refused either way).
	if p, err := e.r.Peek(4); err == nil && binary.BigEndian.Uint32(p) > maxFrame {
		return fmt.Errorf("bedrock event stream: %w (%d bytes)", ErrFrameTooLarge, binary.BigEndian.Uint32(p))
	}
	cr := &countReader{r: e.r}
	m, err := e.dec.Decode(cr, e.payload[:0])
	if err != nil {
		if errors.Is(err, io.EOF) && cr.n == 0 {
			return io.EOF // the stream ended between frames
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("bedrock event stream: %w", err)
	}
	e.payload = m.Payload // at most maxFrame: the buffer kept between frames is bounded too
	var name string
	payload := m.Payload
	switch headerString(m.Headers, ":message-type") {
	case "event":
		name = headerString(m.Headers, ":event-type")
	case "exception":
		name = headerString(m.Headers, ":exception-type")
	case "error":
		// The event stream's own error frame (:error-code,
		// :error-message, no payload): an internal error, as Bedrock's
		// exceptions say it.
		name = "internalServerException"
		payload, _ = json.Marshal(map[string]string{
			"message": headerString(m.Headers, ":error-code") + ": " + headerString(m.Headers, ":error-message"),
		})
	}
	if name == "" {
		return nil // nothing to say: the next Read reads the next frame
	}
	e.out = append(e.out, "event: "...)
	e.out = appendLine(e.out, name)
	e.out = append(e.out, "\ndata: "...)
	e.out = appendPayload(e.out, payload)
	e.out = append(e.out, "\n\n"...)
	return nil
}

func (e *eventStream) Close() error { return e.body.Close() }

// headerString is a string header's value, "" for none.
func headerString(hs eventstream.Headers, name string) string {
	if v, ok := hs.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

// appendLine appends s without the line breaks that would end an SSE
// line early.
func appendLine(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != '\n' && s[i] != '\r' {
			dst = append(dst, s[i])
		}
	}
	return dst
}

// appendPayload appends a payload as one data line: JSON compacted if it
// has line breaks (in JSON they can only be white space), {} for none.
func appendPayload(dst, payload []byte) []byte {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 {
		return append(dst, "{}"...)
	}
	if !bytes.ContainsAny(payload, "\r\n") {
		return append(dst, payload...)
	}
	var b bytes.Buffer
	if json.Compact(&b, payload) == nil {
		return append(dst, b.Bytes()...)
	}
	return appendLine(dst, string(payload))
}

// countReader counts what a frame's decoding read, to tell a stream that
// ended between frames from one cut inside a frame.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
