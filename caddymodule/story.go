package caddymodule

import (
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// A finished request as the status page, the history and the spans tell it
// alike: when it arrived, why it failed, whose health a try speaks of, the
// client's address and headers (masked), times in milliseconds. This file
// references nothing else of the package.

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// arrival is when the request arrived: the handler's start, else (a
// request the handler did not take) its duration back from now, but no
// later than its first attempt began.
func arrival(res *handler.Result, now time.Time) time.Time {
	if !res.Start.IsZero() {
		return res.Start
	}
	at := now.Add(-res.Duration)
	if len(res.Tries) > 0 && res.Tries[0].Start.Before(at) {
		at = res.Tries[0].Start
	}
	return at
}

// failureReason is why a request failed, for the history and the page: the
// key rule that refused it, its answer's cut, its last attempt's verdict, or
// the code of the error the gateway answered before any attempt (a 404's
// model_not_found).
func failureReason(res *handler.Result) string {
	switch {
	case res.Refused != "":
		return "key " + res.Refused
	case res.Cut == "client":
		return "client closed"
	case res.Cut != "":
		return "cut " + res.Cut
	case res.Status < 400:
		return ""
	case res.Status == handler.StatusClientClosed:
		return "client closed"
	case len(res.Tries) > 0:
		return res.Tries[len(res.Tries)-1].Reason
	}
	return res.Code // refused before any attempt: model_not_found, invalid_request_error, …
}

// failureScope is whose health a failed try speaks of; an answer's is none.
func failureScope(t handler.Try) string {
	if t.Reason == "ok" {
		return ""
	}
	return t.Scope
}

// maskedHead bounds what maskClient reads of a header: the history and the
// spans keep at most 128 bytes of one, and a secret that starts in them is
// shorter than the rest of the head, so it is masked whole.
const maskedHead = 4 << 10

// maskClient is a header the client sent (User-Agent, X-Session-Id), as the
// history and the spans keep it (docs/door.md#a-tenants-data-is-its-own): masked as engine
// output is (engines.Mask: the gateway's key tokens and whatever looks like
// a credential), so that a token sent there is neither stored nor exported.
// Only its head is masked: a header may be as long as the server allows,
// and the masks' patterns cost per byte.
func maskClient(v string) string {
	if v == "" {
		return ""
	}
	return engines.Mask(v[:min(len(v), maskedHead)], nil)
}

// clientAddress is the client's IP as Caddy sees it (its trusted proxies
// honoured), else the connection's.
func clientAddress(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
