// Package upstream shapes the request an engine is sent: the caller's
// credentials and hop-by-hop headers never pass, the path joins the
// engine's base.
package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// callerCredentialHeaders never leave the gateway: they are the caller's keys
// for the gateway, not for any engine, whatever hop the request takes.
var callerCredentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key"}

// hopHeaders are connection-level headers a proxy must not forward (RFC 9110
// §7.6.1), the same list Caddy's reverse_proxy drops.
var hopHeaders = []string{
	"Alt-Svc", "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// CopyHeader copies src into dst without hop-by-hop headers, including those
// src's Connection header names.
func CopyHeader(dst, src http.Header) {
	var named []string
	for _, v := range src["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				named = append(named, http.CanonicalHeaderKey(f))
			}
		}
	}
outer:
	for k, vv := range src {
		for _, h := range hopHeaders {
			if k == h {
				continue outer
			}
		}
		for _, h := range named {
			if k == h {
				continue outer
			}
		}
		dst[k] = vv
	}
}

// NewRequest builds the request one attempt sends: the caller's method,
// path and headers, minus hop-by-hop headers and the caller's credentials,
// plus the engine's own key, with body as the exact bytes to send.
func NewRequest(ctx context.Context, r *http.Request, base *url.URL, cfg *engines.Config, body []byte) *http.Request {
	u := *base
	u.Path = JoinPath(base.Path, r.URL.Path)
	u.RawPath = ""
	// a query in `to` (Azure's api-version) is kept, the caller's added
	switch {
	case base.RawQuery == "":
		u.RawQuery = r.URL.RawQuery
	case r.URL.RawQuery != "":
		u.RawQuery = base.RawQuery + "&" + r.URL.RawQuery
	}
	u.Fragment = ""

	h := make(http.Header, len(r.Header)+2)
	CopyHeader(h, r.Header)
	for _, k := range callerCredentialHeaders {
		delete(h, k)
	}
	// the caller's cookies are for the gateway's site, and an engine with
	// its own key decides its own organization and project
	delete(h, "Cookie")
	if cfg.APIKey != "" {
		delete(h, "Openai-Organization")
		delete(h, "Openai-Project")
	}
	// the transport negotiates compression itself and decodes it, so the
	// gateway always sees (and can judge) plain SSE
	delete(h, "Accept-Encoding")
	delete(h, "Content-Length")
	cfg.SetKey(h)
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // as reverse_proxy: do not add Go's
	}

	// a value: WithContext copies it to the heap, once
	out := http.Request{
		Method:        r.Method,
		URL:           &u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Host:          u.Host,
		ContentLength: int64(len(body)),
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if len(body) == 0 {
			out.Body = http.NoBody
		}
		out.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	return out.WithContext(ctx)
}

// JoinPath appends the request path to the engine's base path. A base that
// already ends in /v1 (a common way to write an OpenAI base URL) is not
// doubled: to https://host/v1 and POST /v1/chat/completions give
// https://host/v1/chat/completions.
func JoinPath(basePath, reqPath string) string {
	basePath = strings.TrimSuffix(basePath, "/")
	if basePath == "" {
		return reqPath
	}
	if strings.HasSuffix(basePath, "/v1") && (reqPath == "/v1" || strings.HasPrefix(reqPath, "/v1/")) {
		reqPath = reqPath[len("/v1"):]
	}
	return basePath + reqPath
}
