package translate_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestStreamDirections(t *testing.T) {
	for _, from := range translatetest.Clients {
		for _, to := range translatetest.Clients {
			if from == to {
				continue
			}
			for scenario := range translatetest.Scenarios {
				t.Run(fmt.Sprintf("%v-%v/%s", from, to, scenario), func(t *testing.T) {
					out := translatetest.Run(t, from, to, translate.StreamOptions{IncludeUsage: true}, translatetest.Capture(t, from, scenario))
					evs := translatetest.Split(t, out)
					got := translatetest.Reassemble(t, to, evs)
					want := translatetest.Expect(scenario, from, to)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
					}
					if scenario == "error" {
						return // an SDK stops at the error: Reassemble's alone
					}
					want.Thinking, want.Signature = "", ""
					if got := translatetest.ReadSDK(t, to, evs); !reflect.DeepEqual(got, want) {
						t.Errorf("read by the SDK:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
					}
				})
			}
		}
	}
}

// sdkCaptures are streams of the real APIs that the official SDKs' own
// test suites replay (testdata/streams/README.md names each one's
// repository, path and commit), and what their user was told: the
// Anthropic API's padding after the JSON, its ping, message_delta's
// repeated input_tokens, a max_tokens stop inside a tool call whose block
// never stops, OpenAI's content null beside tool calls and its usage
// chunk without cached tokens.
var sdkCaptures = []struct {
	from     api.API
	scenario string
	want     translatetest.Answer
}{
	{api.Messages, "sdk_text", translatetest.Answer{Text: "The current weather in San Francisco is 68 degrees Fahrenheit.",
		Stop: translate.StopEnd, Usage: api.Usage{Input: 509, Output: 19}}},
	{api.Messages, "sdk_tools", translatetest.Answer{Text: "I'll get the current weather in San Francisco for you in Fahrenheit.",
		Tools: []translatetest.Call{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Args: `{"city": "San Francisco", "units": "fahrenheit"}`}},
		Stop:  translate.StopTool, Usage: api.Usage{Input: 397, Output: 89}}},
	{api.Messages, "sdk_length", translatetest.Answer{Text: "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now.",
		// cut by max_tokens: the arguments are what came, unfinished JSON
		Tools: []translatetest.Call{{ID: "toolu_01EKqbqmZrGRXy18eN7m9kvY", Name: "make_file",
			Args: "{\"filename\": \"taxes.txt\", \"lines_of_text\": [\n\"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s\",\n\"\",\n\"## INTRODUCTION\",\n\"\",\n\"Filing taxes"}},
		Stop: translate.StopLength, Usage: api.Usage{Input: 450, Output: 124}}},
	{api.Chat, "sdk_text", translatetest.Answer{Text: "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
		Stop: translate.StopEnd, Usage: api.Usage{Input: 14, Output: 30}}},
	{api.Chat, "sdk_tools", translatetest.Answer{Tools: []translatetest.Call{
		{ID: "call_JMW1whyEaYG438VE1OIflxA2", Name: "GetWeatherArgs", Args: `{"city": "Edinburgh", "country": "GB", "units": "c"}`},
		{ID: "call_DNYTawLBoN8fj3KN6qU9N1Ou", Name: "get_stock_price", Args: `{"ticker": "AAPL", "exchange": "NASDAQ"}`}},
		Stop: translate.StopTool, Usage: api.Usage{Input: 149, Output: 60}}},
}

// TestStreamSDKCaptures translates each real stream toward every other
// client API and reads the result twice: event by event as the client's
// SDK checks a stream (Reassemble), and by that SDK's own accumulator
// (ReadSDK), as the user's program would. Both tell what the API said.
func TestStreamSDKCaptures(t *testing.T) {
	for _, c := range sdkCaptures {
		for _, to := range translatetest.Clients {
			if to == c.from {
				continue
			}
			t.Run(fmt.Sprintf("%v-%v/%s", c.from, to, c.scenario), func(t *testing.T) {
				out := translatetest.Run(t, c.from, to, translate.StreamOptions{IncludeUsage: true}, translatetest.Capture(t, c.from, c.scenario))
				evs := translatetest.Split(t, out)
				if got := translatetest.Reassemble(t, to, evs); !reflect.DeepEqual(got, c.want) {
					t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, c.want, out)
				}
				if got := translatetest.ReadSDK(t, to, evs); !reflect.DeepEqual(got, c.want) {
					t.Errorf("read by the SDK:\n got %+v\nwant %+v\nstream:\n%s", got, c.want, out)
				}
			})
		}
	}
}
