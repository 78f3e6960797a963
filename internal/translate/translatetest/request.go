package translatetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// RequestCase is one row of the request table: a body of from translated to to,
// members of the output (dotted paths, array indexes as numbers) with the
// JSON they must hold ("-" for absent), the dropped list's entries that
// must be there, and the member of a *Error when one is wanted.
type RequestCase struct {
	Name    string
	From    api.API
	To      api.API
	Body    string
	Want    map[string]string
	Dropped []string
	Err     string
	Opts    translate.RequestOptions
}

// RunRequests runs each case as a subtest: its body translated, the
// members, the dropped list and the error checked.
func RunRequests(t *testing.T, cases []RequestCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name+"/"+c.From.String()+"->"+c.To.String(), func(t *testing.T) {
			out, dropped, err := translate.RequestBody(c.From, c.To, []byte(c.Body), c.Opts)
			if c.Err != "" {
				var e *translate.Error
				if !errors.As(err, &e) || e.Member != c.Err {
					t.Fatalf("err = %v, want a *Error for %s", err, c.Err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			var m any
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			for path, want := range c.Want {
				if got := At(m, path); got != canonical(want) {
					t.Errorf("%s = %s, want %s\nout: %s", path, got, want, out)
				}
			}
			for _, d := range c.Dropped {
				if !slices.Contains(dropped, d) {
					t.Errorf("dropped = %q, want it to hold %q", dropped, d)
				}
			}
		})
	}
}

// canonical is want with its objects' keys in order, as At writes
// them ("-" stays "-").
func canonical(want string) string {
	var v any
	if json.Unmarshal([]byte(want), &v) != nil {
		return want
	}
	b, _ := translate.Marshal(v)
	return string(b)
}

// At is the compact JSON at a dotted path of v, "-" when absent.
func At(v any, path string) string {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return "-"
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return "-"
			}
			v = x[i]
		default:
			return "-"
		}
	}
	b, _ := translate.Marshal(v)
	return string(b)
}
