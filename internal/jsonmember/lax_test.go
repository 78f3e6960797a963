package jsonmember

import (
	"encoding/json"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// The spellings vLLM and SGLang (pydantic, lax mode) read as a whole
// number, read alike here.
func TestLaxIntReadsWhatPydanticReads(t *testing.T) {
	for raw, want := range map[string]int64{
		`5000`: 5000, `5e3`: 5000, `5000.0`: 5000, `"5000"`: 5000, `" 5000 "`: 5000,
		`"5_000"`: 5000, `"5e3"`: 5000, `-1`: -1, `1e30`: maxLax, `"99999999999999999999"`: maxLax,
	} {
		n, ok, err := laxOf(t, raw)
		if err != nil || !ok || n != want {
			t.Errorf("%s: %d %v %v, want %d", raw, n, ok, err, want)
		}
	}
	for _, raw := range []string{`true`, `false`, `5000.5`, `"abc"`, `"0x10"`, `[]`, `{}`, `"inf"`, `"NaN"`, `1e400`} {
		if _, _, err := laxOf(t, raw); err == nil {
			t.Errorf("%s read as a whole number", raw)
		}
	}
	if _, ok, err := laxOf(t, `null`); ok || err != nil {
		t.Errorf("null: %v %v", ok, err)
	}
}

func laxOf(t *testing.T, raw string) (int64, bool, error) {
	t.Helper()
	b := []byte(`{"max_tokens":` + raw + `}`)
	if !json.Valid(b) {
		t.Fatalf("%s is not JSON", raw)
	}
	m, ok := LastMember(b, 0, "max_tokens")
	if !ok {
		t.Fatalf("%s: no member", raw)
	}
	return LaxInt(b, m)
}

// n is read once and spelled exactly, as the other members that cost.
func TestNIsOneSpellingAsTheOtherCountsAre(t *testing.T) {
	for _, body := range []string{`{"n":1,"N":10}`, `{"N":10}`, `{"best_of":1,"Best_Of":9}`, `{"n":1,"n":9}`} {
		f, err := ScanRequest([]byte(body))
		if err != nil || f.Ambiguous == "" {
			t.Errorf("%s: %+v %v", body, f.Ambiguous, err)
		}
	}
	if f, err := ScanRequest([]byte(`{"n":2,"m":1,"a":3}`)); err != nil || f.Ambiguous != "" {
		t.Fatalf("%v %q", err, f.Ambiguous)
	}
}

// FuzzLaxReading extends the differential check of the one reading (issue
// 39) to the numbers and the flag a reservation reads: for a body the
// gateway accepts, each token limit and choice count LaxInt reads is what a
// pydantic-lax reader (exact names, the last wins, numbers from strings and
// integral floats) and Go's encoding/json (names folded, int fields) read,
// where they read one; and a stream the gateway accepts (a boolean, null or
// none) streams for the lax reader exactly when the gateway sees a stream.
func FuzzLaxReading(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","max_tokens":"5000","n":10}`,
		`{"model":"a","max_tokens":5e3,"best_of":"2"}`,
		`{"model":"a","max_completion_tokens":5000.0,"stream":true}`,
		`{"model":"a","max_output_tokens":" 7_0 ","stream":"true"}`,
		`{"model":"a","n":1,"N":10}`,
		`{"model":"a","max_tokens":1e400}`,
	} {
		f.Add([]byte(s))
	}
	names := []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of"}
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := ScanRequest(b)
		if err != nil || fields.Ambiguous != "" {
			return // refused
		}
		var exact map[string]any
		if json.Unmarshal(b, &exact) != nil {
			return
		}
		var folded struct {
			MaxTokens *int64 `json:"max_tokens"`
			N         *int64 `json:"n"`
		}
		goOK := json.Unmarshal(b, &folded) == nil
		obj := SkipSpace(b, 0)
		for _, name := range names {
			m, ok := LastMember(b, obj, name)
			if !ok {
				if _, there := exact[name]; there {
					t.Fatalf("%q: %s is there for an exact reader, not for the gateway", b, name)
				}
				continue
			}
			n, ok, err := LaxInt(b, m)
			if err != nil {
				continue // refused: 400 naming the member
			}
			if py, pyOK := laxengine.Int(exact[name]); pyOK && (!ok || py != n) && py <= maxLax && py >= -maxLax {
				t.Fatalf("%q: %s is %d for a pydantic engine, %d (%v) for the gateway", b, name, py, n, ok)
			}
			var goN *int64
			switch name {
			case "max_tokens":
				goN = folded.MaxTokens
			case "n":
				goN = folded.N
			}
			if goOK && goN != nil && (!ok || *goN != n) && *goN <= maxLax && *goN >= -maxLax {
				t.Fatalf("%q: %s is %d for a Go engine, %d (%v) for the gateway", b, name, *goN, n, ok)
			}
		}
		if s := fields.Stream; !s.OK() || IsBool(b, s) || string(s.Raw(b)) == "null" {
			if laxengine.Bool(exact["stream"]) != IsTrue(b, fields.Stream) {
				t.Fatalf("%q: a pydantic engine streams %v, the gateway %v", b, laxengine.Bool(exact["stream"]), IsTrue(b, fields.Stream))
			}
		}
	})
}
