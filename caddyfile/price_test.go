package caddyfile

import (
	"strings"
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

// A money budget's and a team's mistakes, each with its line.
func TestSpendAndTeamErrorsNameTheProblemAndTheLine(t *testing.T) {
	for _, tc := range []struct{ name, block, want string }{
		{"no budget", "key k sk-0123456789abcdef {\n\t\tspend\n\t}", "spend takes budgets in US dollars per window, such as 1/d or 50/mo, at Testfile:3"},
		{"a count, not dollars", "key k sk-0123456789abcdef {\n\t\tspend 1e3/d\n\t}", `key k: spend "1e3/d": amount "1e3": not a number (digits, a point and digits, then optionally k or M), at Testfile:3`},
		{"no window", "key k sk-0123456789abcdef {\n\t\tspend 5\n\t}", `key k: spend "5": want DOLLARS/WINDOW, as in 1/d or 50/mo, at Testfile:3`},
		{"an unknown team", "key k sk-0123456789abcdef {\n\t\tteam nope\n\t}", "key k: team nope is no team of this gateway (team nope { spend 100/mo }), at Testfile:2"},
		{"a team of nothing", "team t {\n\t}", "team t limits nothing: give it rate, tokens or spend, at Testfile:2"},
		{"a team twice", "team t {\n\t\tspend 1/d\n\t}\n\tteam t {\n\t\tspend 2/d\n\t}", "team t is defined twice (first at Testfile:2), at Testfile:5"},
		{"a team's unknown fallback", "team t {\n\t\tspend 1/d\n\t\tover_budget fallback nope\n\t}", `team t: over_budget fallback "nope" is no model or pool of this gateway, at Testfile:2`},
		{"a team's unknown option", "team t {\n\t\tmodels gpt-4o\n\t}", "unknown team subdirective"},
		{"over_budget without a budget", "key k sk-0123456789abcdef {\n\t\tover_budget fallback gpt-4o\n\t}", "key k: over_budget fallback needs a token or money budget (tokens 200k/d, spend 1/d, or a team's) to apply to, at Testfile:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser("llm_gateway {\n\t" + tc.block + remote + "\n}"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
