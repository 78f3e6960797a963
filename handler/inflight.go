package handler

import (
	"net/http"
	"sync/atomic"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/bounded"
)

// Bodies in flight (issue 51). max_body bounds each request body; nothing
// bounded them together, and ten uploads of 40 MiB held 300 MB at once
// (401 MB over h2c). max_body_in_flight bounds the bytes the bodies held at
// once take together, and what a request took is given back when it ends
// (ServeHTTP), since its body is held until then, for a retry or a
// fallback:
//
//	the body                 takes from the budget
//	its first 64 KiB         nothing: a chat request's body is rarely larger,
//	                         and such requests go on whatever uploads hold
//	with a Content-Length    the rest of it, at once, before a byte is read:
//	                         a body is admitted whole or not at all (ten
//	                         uploads read side by side, each taking as it
//	                         came, would fill the budget with ten halves and
//	                         all be refused); read into one buffer, with no
//	                         copy to join its chunks (bounded.ReadWhole)
//	sent chunked             each chunk as it is allocated (bounded.Read)
//
// A body that would pass the budget is answered 503 bodies_in_flight with
// Retry-After: 1, before it is read when its Content-Length says so.

// bodyBudget is the gateway's max_body_in_flight and what its bodies hold.
type bodyBudget struct {
	limit int64
	held  atomic.Int64
}

// freeBody is what of each body the budget does not count.
const freeBody = 64 << 10

// bodyHold is one request's part of the budget (a bounded.Budget): what
// its body took, given back by release, and what of its free 64 KiB it used.
type bodyHold struct {
	b     *bodyBudget
	taken int64
	used  int64 // of freeBody
}

func (h *bodyHold) Take(n int64) bool {
	free := min(n, freeBody-h.used)
	h.used += free
	if n -= free; n == 0 {
		return true
	}
	for {
		held := h.b.held.Load()
		if held+n > h.b.limit {
			return false
		}
		if h.b.held.CompareAndSwap(held, held+n) {
			h.taken += n
			return true
		}
	}
}

// release gives back what the request's body took, when it ends.
func (h *bodyHold) release() {
	if h.taken != 0 {
		h.b.held.Add(-h.taken)
		h.taken = 0
	}
}

// busy is the answer to a body past the budget: the client may send it
// again once other bodies' requests end.
func (b *bodyBudget) busy(w http.ResponseWriter) *apierror.Error {
	w.Header().Set("Retry-After", "1")
	return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "bodies_in_flight",
		Message: "the gateway holds its max_body_in_flight of " + bounded.SizeText(b.limit) + " in request bodies already; send this one again shortly"}
}
