// Package floor is the bench's floor: bench_floor, a Caddy HTTP handler
// that relays a request to one upstream through Caddy's reverse-proxy
// transport (with the gateway's 1 KiB write buffer) and copies the answer
// back with a 1 KiB buffer, flushing after every read, and does nothing
// else: no plan, no events, no budgets, no history. It is what any
// handler on Caddy and that transport costs per open stream, so the memory
// phase measures it beside the gateway: what the gateway adds is the
// difference. It is compiled into the bench's Caddy only (bench/caddy).
//
//	bench_floor 127.0.0.1:9000
package floor

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func init() {
	caddy.RegisterModule(Floor{})
	httpcaddyfile.RegisterHandlerDirective("bench_floor", parse)
	httpcaddyfile.RegisterDirectiveOrder("bench_floor", httpcaddyfile.Before, "reverse_proxy")
}

// maxBody is the largest request body the floor reads (the bench's are
// under 1 KiB).
const maxBody = 1 << 20

// Floor is the bench_floor handler.
type Floor struct {
	// Upstream is host:port, spoken to over plain HTTP.
	Upstream string `json:"upstream"`

	transport *reverseproxy.HTTPTransport
}

func (Floor) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.bench_floor",
		New: func() caddy.Module { return new(Floor) },
	}
}

// Provision builds the transport as the gateway builds an engine's.
func (f *Floor) Provision(ctx caddy.Context) error {
	f.transport = &reverseproxy.HTTPTransport{WriteBufferSize: 1 << 10}
	return f.transport.Provision(ctx)
}

func (f *Floor) Cleanup() error { return f.transport.Cleanup() }

func (f *Floor) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return caddyhttp.Error(http.StatusRequestEntityTooLarge, err)
	}
	u := url.URL{Scheme: "http", Host: f.Upstream, Path: r.URL.Path}
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = &sliceReader{b: body}
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), rd)
	if err != nil {
		return caddyhttp.Error(http.StatusBadGateway, err)
	}
	out.ContentLength = int64(len(body))
	for k, v := range r.Header {
		out.Header[k] = v
	}
	resp, err := f.transport.RoundTrip(out)
	if err != nil {
		return caddyhttp.Error(http.StatusBadGateway, err)
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	var buf [1 << 10]byte
	for {
		n, err := resp.Body.Read(buf[:])
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if ferr := rc.Flush(); ferr != nil {
				return nil
			}
		}
		if err != nil {
			return nil
		}
	}
}

// sliceReader is bytes.Reader without its extra methods, so the transport
// writes the body as any handler's would be.
type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

func parse(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	f := new(Floor)
	if err := f.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return f, nil
}

// UnmarshalCaddyfile reads "bench_floor <host:port>".
func (f *Floor) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if !d.NextArg() {
		return d.ArgErr()
	}
	f.Upstream = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if _, _, err := netSplit(f.Upstream); err != nil {
		return d.Errf("bench_floor: %v", err)
	}
	return nil
}

func netSplit(hostport string) (string, int, error) {
	u, err := url.Parse("http://" + hostport)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil || p <= 0 {
		return "", 0, fmt.Errorf("%q: want host:port", hostport)
	}
	return u.Hostname(), p, nil
}

var (
	_ caddyhttp.MiddlewareHandler = (*Floor)(nil)
	_ caddy.Provisioner           = (*Floor)(nil)
	_ caddy.CleanerUpper          = (*Floor)(nil)
	_ caddyfile.Unmarshaler       = (*Floor)(nil)
)
