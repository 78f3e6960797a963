package jsonmember

import (
	"encoding/json"
	"testing"
)

// The spellings vLLM and SGLang (pydantic, lax mode) read as a whole
// number, read alike here (issue 39).
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
