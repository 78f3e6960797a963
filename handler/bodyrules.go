package handler

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/multipart"
)

// One body, one reading (docs/door.md). The gateway routes, counts and
// filters a request by what it reads of the body; an engine runs what it
// reads. Wherever the two readings could differ, the body is refused:
//
//	what                      the gateway's rule                     because
//	the parser                the route's: a form route (audio        ollama decodes the first JSON
//	                          transcriptions and translations, image  value of any body, whatever its
//	                          edits and variations) takes only        Content-Type: a JSON object
//	                          multipart/form-data, every other route  before a form's parts ran while
//	                          only a JSON object, never a multipart   the form was routed and counted
//	                          body
//	the encoding              a JSON body is UTF-8 without a byte     Python's json takes UTF-16, -32
//	                          order mark, on every route              and a BOM; Go's and ours do not
//	the numbers that cost     max_tokens, max_completion_tokens,      pydantic engines read "5000" and
//	                          max_output_tokens, n, best_of read as   5e3 as 5000: a limit the gateway
//	                          pydantic's lax int reads them           read as none reserved too little
//	                          (jsonmember.LaxInt), or a 400 naming
//	                          the member; the reservation is the
//	                          limit times the choices
//	the flag that streams     stream is a JSON boolean (or null)      pydantic streams "true", 1, "yes":
//	                          or a 400                                a stream the gateway did not ask
//	                                                                  usage of was charged its reserve

// checkMediaType refuses a body the route does not read: an encoded body
// on any route, a form route's body that is not multipart/form-data,
// another route's that is multipart.
func checkMediaType(r *http.Request, op operation) *apierror.Error {
	if gerr := checkEncoding(r); gerr != nil {
		return gerr
	}
	ct := r.Header.Get("Content-Type")
	form := op == opUpload
	if !form && (ct == "application/json" || !hasPrefixFold(strings.TrimSpace(ct), "multipart/")) {
		return nil // what nearly every request is: parsed no further (a map and a string each)
	}
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case form && mt != "multipart/form-data":
		return unsupportedMedia(fmt.Sprintf("this route takes a multipart/form-data body (its file and a \"model\" field), not %s", mediaName(ct)))
	case !form:
		return unsupportedMedia(fmt.Sprintf("this route takes a JSON object, not a %s body: engines read such a body two ways (as a form, or as the JSON before it)", mediaName(mt)))
	}
	return nil
}

// hasPrefixFold reports whether s begins with prefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// checkEncoding refuses a body sent with a Content-Encoding: the gateway
// reads bodies as they are sent, and an engine that decodes one would run
// what the gateway never read.
func checkEncoding(r *http.Request) *apierror.Error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return unsupportedMedia(fmt.Sprintf("the body is sent with Content-Encoding %s: send it unencoded, the gateway reads bodies as they are", shorten(ce, 32)))
	}
	return nil
}

// checkPassthroughMedia refuses an /upstream/ body the gateway cannot read
// as what it claims: an encoded one, or a multipart one whose Content-Type
// does not parse (an engine's lenient parser would still read its form).
func checkPassthroughMedia(r *http.Request) *apierror.Error {
	if gerr := checkEncoding(r); gerr != nil {
		return gerr
	}
	ct := r.Header.Get("Content-Type")
	if _, ok := multipart.Boundary(ct); !ok && strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "multipart/") {
		return unsupportedMedia(fmt.Sprintf("the body's Content-Type %s does not parse as multipart/form-data with a boundary", mediaName(ct)))
	}
	return nil
}

func mediaName(ct string) string {
	if ct == "" {
		return "a body without a Content-Type"
	}
	return shorten(ct, 64)
}

func unsupportedMedia(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusUnsupportedMediaType, Type: apierror.TypeInvalidRequest, Code: "unsupported_media_type", Message: msg}
}

// encodingProblem says why a body is not UTF-8 JSON text as the gateway
// reads it, for a clearer 400 than the scanner's: "" when it may be.
// RFC 8259 §8.1: JSON text exchanged between systems is UTF-8 without a
// BOM; RFC 4627 §3 told the encodings apart by the NULs of the first four
// bytes, as Python's json.loads still does.
func encodingProblem(body []byte) string {
	switch {
	case bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}):
		return "the body starts with a byte order mark: send UTF-8 JSON without one"
	case bytes.HasPrefix(body, []byte{0xFE, 0xFF}), bytes.HasPrefix(body, []byte{0xFF, 0xFE}),
		len(body) >= 2 && (body[0] == 0 || body[1] == 0):
		return "the body is UTF-16 or UTF-32: send UTF-8 JSON"
	}
	return ""
}

// looksJSON reports whether a passthrough body is one an engine reads as
// JSON, and so must be the one UTF-8 object every route takes: its
// Content-Type says JSON, or it has none (FastAPI engines then decode it
// as JSON), or its bytes start as JSON or as another encoding of it.
func looksJSON(ct string, body []byte) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	if ct == "" || mt == "application/json" || strings.HasSuffix(mt, "+json") || encodingProblem(body) != "" {
		return true
	}
	i := jsonmember.SkipSpace(body, 0)
	return i < len(body) && (body[i] == '{' || body[i] == '[')
}

// counts are the numbers a reservation reads of a body.
type counts struct {
	most    int64 // the largest token limit the body names, 0 for none
	choices int64 // n or best_of, the larger; 0 for none
	// unbounded: the body asks for an answer no limit bounds: llama-server's
	// n_predict -1 (it overrides max_tokens), or ignore_eos without a
	// limit. A key with a token budget may not send it (admission.go).
	unbounded bool
}

// limitNames are the members that bound an answer's tokens, as the engines
// read them: OpenAI's three, llama-server's n_predict (which its OpenAI
// layer takes over max_tokens), and vLLM's min_tokens (a floor the answer
// reaches whatever the limits say).
var limitNames = []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict", "min_tokens", "n", "best_of", "ignore_eos"}

// readCounts reads the numbers a reservation reads (the token limits, n,
// best_of) and checks the stream flag, as the laxest engine would; a value
// no engine reads as the gateway does is a 400 naming the member.
func readCounts(b []byte, f *jsonmember.Fields) (counts, *apierror.Error) {
	var c counts
	if m := f.Stream; m.OK() && !jsonmember.IsBool(b, m) && string(m.Raw(b)) != "null" {
		return c, apierror.BadRequest("invalid_stream", fmt.Sprintf(`the body's "stream" is %s: send true or false (engines read strings and numbers as true, and the gateway would not see the stream)`, shorten(string(m.Raw(b)), 32)))
	}
	// one walk of the body's members for all of them: a body's messages
	// are skipped once, not once per name (each is given once: ReadNames)
	var gerr *apierror.Error
	ignoreEOS := false
	jsonmember.Named(b, jsonmember.SkipSpace(b, 0), limitNames, func(name string, m jsonmember.Member) {
		if name == "ignore_eos" {
			ignoreEOS = string(m.Raw(b)) != "false" && string(m.Raw(b)) != "null"
			return
		}
		n, ok, err := jsonmember.LaxInt(b, m)
		switch {
		case err != nil && gerr == nil:
			gerr = apierror.BadRequest("invalid_number", fmt.Sprintf(`the body's %q is %s: send a whole number`, name, shorten(string(m.Raw(b)), 32)))
		case !ok:
		case name == "n" || name == "best_of":
			c.choices = max(c.choices, n)
		case n < 0 && name != "min_tokens":
			// llama-server reads max_tokens -1 as n_predict -1: no end
			c.unbounded = true
		default:
			c.most = max(c.most, n)
		}
	})
	if gerr != nil {
		return counts{}, gerr
	}
	c.unbounded = c.unbounded || ignoreEOS && c.most <= 0
	return c, nil
}

// maxEcho is the most of a caller's model name an error repeats.
const maxEcho = 256

// shorten shortens what the gateway echoes of a caller's input: a message names
// it, never carries it whole (a 404 echoed a 100 KB model name).
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
