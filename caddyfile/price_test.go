package caddyfile

import (
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// A price line's mistakes, each with its line: a part twice, a part that
// is no price, a missing input or output, a price finer than a millionth
// of a dollar, a name nothing here is called, a name priced twice.
func TestPriceLineErrorsNameTheProblemAndTheLine(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"no prices", `price gpt-4o`, "price takes a model and its prices per million tokens: price <model> input 3 output 15 [cache_read 0.30] [cache_write 3.75] [reasoning 15], at Testfile:2"},
		{"odd words", `price gpt-4o input 3 output`, "price takes a model and its prices per million tokens: price <model> input 3 output 15 [cache_read 0.30] [cache_write 3.75] [reasoning 15], at Testfile:2"},
		{"a part twice", `price gpt-4o input 3 input 4`, "price gpt-4o: input is given twice, at Testfile:2"},
		{"an unknown part", `price gpt-4o input 3 output 4 cached 1`, `price gpt-4o: unknown part "cached" (input, output, cache_read, cache_write or reasoning), at Testfile:2`},
		{"no output", `price gpt-4o input 3 cache_read 1`, "price gpt-4o needs an input and an output price (0 for free), at Testfile:2"},
		{"too fine", `price gpt-4o input 0.0000001 output 4`, `price gpt-4o: input: price "0.0000001": finer than a millionth of a dollar (dollars per million tokens, such as 3 or 0.075), at Testfile:2`},
		{"not a number", `price gpt-4o input $3 output 4`, `price gpt-4o: input: price "$3": not a number (digits, a point and digits) (dollars per million tokens, such as 3 or 0.075), at Testfile:2`},
		{"nothing of that name", `price gpt-5 input 3 output 4`, "price gpt-5: no model, model_name or engine of this gateway is called gpt-5, at Testfile:2"},
		{"an unknown engine", `price other/gpt-4o input 3 output 4`, "price other/gpt-4o: no engine other here (price ENGINE/MODEL, a model or an engine), at Testfile:2"},
		{"twice", "price gpt-4o input 3 output 4\n\tprice gpt-4o input 3 output 5", "price gpt-4o is given twice (first at Testfile:2), at Testfile:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser("llm_gateway {\n\t" + tc.line + remote + "\n}"))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
