package handler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/bounded"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/multipart"
	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// A routed request: its body read once, bounded by max_body, scanned for
// the members the gateway reads, and re-scanned when it switches model.

// request is one routed request's state, shared by its attempts.
type request struct {
	r         *http.Request
	body      []byte // as sent upstream: gateway-only fields removed
	fields    jsonmember.Fields
	model     string
	stream    bool
	fallbacks []byte            // the raw "fallbacks" value, if the body had one
	op        operation         // what it is, decided once from its path (operation.go)
	failover  *failover         // a pool request's bounds across members
	pool      string            // the pool being served, if any
	form      *multipart.Fields // a multipart body's fields; nil for JSON
	blocks    []uint64          // the prompt's block hashes, when a pool chose by them

	key         *keys.Rules    // the caller's key's rules, nil for none
	rateHeaders http.Header    // x-ratelimit-* of the caller's key
	spendLeft   quota.Headroom // what the door left of its money budget (cheap.go)
	overBudget  bool           // served by the key's over_budget fallback
	passthrough bool           // a /upstream/ request: relayed as the engine answers
	route       string         // a path an engine's routes line names, which only such engines serve (v1routes.go)
	hideUsage   bool           // the usage chunk is the gateway's, not the client's
	keptError   int32          // 1 once an attempt kept its error body whole (keepError)

	counts         // the token limits and choices the body names (bodyrules.go)
	estimate int64 // the tokens it reserves of its key's budgets (estimateTokens)

	// translations are the body read once for translation, and what it
	// was written as for each engine API and model (translate.go); made
	// with the request, shared by its copies for another model
	translations *translations
}

// keepError reports whether an attempt's error body may be kept whole: for
// the first attempt that asks, once per request (one 1 MiB body, not one
// per attempt). A race's attempts end side by side: the flag is atomic.
func (req *request) keepError() bool {
	return atomic.CompareAndSwapInt32(&req.keptError, 0, 1)
}

// json reports whether the body is JSON (not a multipart form).
func (req *request) json() bool { return req.form == nil }

// bodyFor is the body as sent for model: the caller's, with its model
// rewritten when an engine calls the model another name.
func (req *request) bodyFor(model string) []byte {
	switch {
	case model == req.model:
		return req.body
	case req.form != nil:
		return jsonmember.ApplyEdits(req.body, jsonmember.Edit{Start: req.form.Model.Start, End: req.form.Model.End, Repl: []byte(model)})
	}
	return jsonmember.ApplyEdits(req.body, jsonmember.ReplaceValue(req.fields.Model, model))
}

// readRequest reads and scans the body, once, bounded by max_body, with
// the parser of its route (bodyrules.go).
func (g *Gateway) readRequest(w http.ResponseWriter, r *http.Request, res *Result) (*request, *apierror.Error) {
	op := res.op
	if gerr := checkMediaType(r, op); gerr != nil {
		return nil, gerr
	}
	body, gerr := g.readBodyOnce(w, r, &res.body)
	if gerr != nil {
		return nil, gerr
	}
	if op == opUpload {
		boundary, _ := multipart.Boundary(r.Header.Get("Content-Type"))
		return readForm(r, body, boundary)
	}
	// the body is scanned into the request it makes (jsonmember.Fields.Scan)
	req := &request{r: r, op: op, translations: &translations{}}
	if gerr := g.scanJSON(body, &req.fields); gerr != nil {
		return nil, gerr
	}
	if req.fields.Fallbacks.OK() {
		var err error
		if body, req.fallbacks, err = stripFallbacks(body, &req.fields); err != nil {
			return nil, apierror.BadRequest("invalid_json", err.Error())
		}
	}
	model, ok := jsonmember.StringValue(body, req.fields.Model)
	if !ok || len(model) == 0 {
		return nil, apierror.BadRequest("missing_model", `the request body has no "model": name one of GET /v1/models`)
	}
	req.body, req.model, req.stream = body, string(model), jsonmember.IsTrue(body, req.fields.Stream)
	if req.counts, gerr = readCounts(body, &req.fields); gerr != nil {
		return nil, gerr
	}
	return req, nil
}

// readBodyOnce reads the request body, bounded by max_body, body_timeout
// and, with the bodies held at once, max_body_in_flight (taken into hold):
// its one read on every route.
func (g *Gateway) readBodyOnce(w http.ResponseWriter, r *http.Request, hold *bodyHold) ([]byte, *apierror.Error) {
	if r.ContentLength > g.maxBody {
		closeAfter(w, r) // not a byte more of it is read
		return nil, g.tooLarge()
	}
	budget, whole := bounded.Budget(hold), false
	if r.ContentLength > 0 {
		if !hold.Take(r.ContentLength) { // whole, before a byte is read (inflight.go)
			closeAfter(w, r)
			return nil, g.bodies.busy(w)
		}
		// counted whole in max_body_in_flight: read into one buffer, with
		// no copy to join its chunks (a body under freeBody is not counted,
		// and is read in chunks as it arrives)
		budget, whole = nil, r.ContentLength > freeBody
	}
	// the deadline is the connection's (a socket's, or an HTTP/2 stream's),
	// so a body that trickles is cut where it waits. Once the body is read
	// it is lifted, or net/http's background read of an HTTP/1.1
	// connection would fail at it and cancel the request. A body refused
	// keeps a deadline of now and its connection is closed after the
	// answer: net/http would otherwise read up to 256 KiB more of it, with
	// no deadline, before writing the refusal.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(g.bodyTimeout)) == nil
	var body []byte
	var err error
	var pace *pacedBody
	if whole {
		var in io.Reader = r.Body
		if deadline { // what it took it keeps at its pace (bodypace.go)
			pace = paced(rc, r.Body, r.ContentLength, g.bodyTimeout)
			in = pace
		}
		body, err = bounded.ReadWhole(in, r.ContentLength)
	} else {
		body, err = bounded.Read(r.Body, r.ContentLength, g.maxBody, budget)
	}
	if deadline && err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if deadline {
			_ = rc.SetReadDeadline(time.Now())
		}
		closeAfter(w, r)
		var ne net.Error
		switch {
		case errors.Is(err, bounded.ErrTooLarge):
			return nil, g.tooLarge()
		case errors.Is(err, bounded.ErrBusy):
			return nil, g.bodies.busy(w)
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			return nil, late(pace, g.bodyTimeout)
		}
		return nil, apierror.BadRequest("body_read_error", "reading the request body: "+err.Error())
	}
	if r.ProtoMajor == 2 {
		// read whole, so closed now rather than when the answer ends: a
		// read that stops at Content-Length never asks for the end, and
		// Go's HTTP/2 server keeps the body's buffer (1 KiB and up) until
		// it sees one, for as long as an answer streams. It drops what the
		// client still sends, END_STREAM included, without a reset.
		// HTTP/1.1 holds no buffer, and HTTP/3 would answer a close with
		// STOP_SENDING.
		r.Body.Close()
	}
	return body, nil
}

// closeAfter closes an HTTP/1.1 connection after the answer: its body is
// not read further. HTTP/2 has no such header; its stream is reset.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// scanJSON is the one reader of a JSON body, with one set of spelling
// rules: every member the gateway reads or writes (jsonmember.ReadNames,
// the engines' filter paths) is given once and spelled exactly, or the body
// is refused, so that the gateway and every engine read the same request.
func (g *Gateway) scanJSON(body []byte, fields *jsonmember.Fields) *apierror.Error {
	if why := encodingProblem(body); why != "" {
		return apierror.BadRequest("invalid_json", why)
	}
	if err := fields.Scan(body, jsonmember.Request); err != nil {
		return apierror.BadRequest("invalid_json", "the request body is not valid JSON: "+err.Error())
	}
	if fields.Ambiguous != "" {
		return ambiguousMember(fields)
	}
	for _, path := range g.filterPaths {
		if name, bad := jsonmember.Misspelled(body, path); bad {
			return apierror.BadRequest("ambiguous_member", fmt.Sprintf(
				"the request body spells %q two ways (ignoring case, or twice) on the path %s, which an engine's filter edits; spell it once, exactly",
				name, strings.Join(path, ".")))
		}
	}
	return nil
}

// readForm reads a multipart body's routing fields.
func readForm(r *http.Request, body []byte, boundary string) (*request, *apierror.Error) {
	f, gerr := scanForm(body, boundary)
	if gerr != nil {
		return nil, gerr
	}
	if !f.Model.OK() {
		return nil, apierror.BadRequest("missing_model", `the multipart body has no "model" field: name one of GET /v1/models`)
	}
	return &request{r: r, body: body, model: string(body[f.Model.Start:f.Model.End]), stream: f.Stream, translations: &translations{},
		form: &f, op: opUpload}, nil
}

// scanForm finds a multipart body's routing fields; a malformed body or a
// field given twice is a 400.
func scanForm(body []byte, boundary string) (multipart.Fields, *apierror.Error) {
	f, err := multipart.Scan(body, boundary)
	var twice *multipart.AmbiguousError
	switch {
	case errors.As(err, &twice):
		return f, apierror.BadRequest("ambiguous_member", err.Error())
	case err != nil:
		return f, apierror.BadRequest("invalid_multipart", err.Error())
	}
	return f, nil
}

func (g *Gateway) tooLarge() *apierror.Error {
	return &apierror.Error{Status: http.StatusRequestEntityTooLarge, Type: apierror.TypeInvalidRequest, Code: "request_too_large", Message: "the request body is larger than the gateway's max_body of " + bounded.SizeText(g.maxBody)}
}

// switchModel is the request as sent for another model: the body's model
// rewritten, everything else as it was.
func (req *request) switchModel(model string) (*request, *apierror.Error) {
	out := *req
	out.body = req.bodyFor(model)
	out.model = model
	if req.form != nil {
		boundary, _ := multipart.Boundary(req.r.Header.Get("Content-Type"))
		f, err := scanForm(out.body, boundary)
		if err != nil {
			return nil, err
		}
		out.form = &f
		return &out, nil
	}
	if err := out.fields.Scan(out.body, jsonmember.Request); err != nil {
		return nil, apierror.BadRequest("invalid_json", err.Error())
	}
	return &out, nil
}

// ambiguousMember refuses a body that spells a member the gateway reads two
// ways: upstreams decoding with Go's encoding/json match member names
// ignoring case and take the last, others take the exact name, so the
// gateway must not route, count or filter by one reading while an engine
// runs another.
func ambiguousMember(f *jsonmember.Fields) *apierror.Error {
	if f.Spelled != "" {
		return apierror.BadRequest("ambiguous_member", fmt.Sprintf(
			"the request body has a member %q, which engines that ignore case read as %q and others do not; spell it %q", f.Spelled, f.Ambiguous, f.Ambiguous))
	}
	return apierror.BadRequest("ambiguous_member", fmt.Sprintf(
		"the request body has more than one %q member (names are compared ignoring case, as many engines do); send it once", f.Ambiguous))
}

// failover bounds a pool request's attempts across members.
type failover struct {
	attempts int
	deadline time.Time
}

// promptBlocks returns the chained hashes of the whole blocks of the
// request's prompt (internal/prefix), nil for a form.
func (req *request) promptBlocks(block int) []uint64 {
	if !req.json() {
		return nil
	}
	return prefix.Prompt(req.body, req.fields.Messages, req.op.api() == api.Messages, block)
}

// stripFallbacks removes every top-level "fallbacks" member from the body
// and returns the new body, its fields, and the raw value of the (last)
// member that was there, if any.
func stripFallbacks(body []byte, fields *jsonmember.Fields) ([]byte, []byte, error) {
	var raw []byte
	for fields.Fallbacks.OK() {
		if raw == nil {
			v := fields.Fallbacks.Value
			raw = append([]byte(nil), body[v.Start:v.End]...)
		}
		body = jsonmember.ApplyEdits(body, jsonmember.RemoveMember(fields.Fallbacks))
		if err := fields.Scan(body, jsonmember.Request); err != nil {
			return nil, nil, err // cannot happen: removal keeps JSON valid
		}
	}
	return body, raw, nil
}
