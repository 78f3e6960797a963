package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// One answer's counts, as each API reports them: 1,000 prompt tokens of
// which 600 were read from the cache and 100 written to it, 50 output
// tokens of which 20 were reasoning. Every reader must come to the same
// Usage (where the API can say it), which is what makes one answer cost
// the same whatever API the client spoke.
func TestEveryAPIReadsOneAnswerAsOneUsage(t *testing.T) {
	want := Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50, Reasoning: 20}
	for _, c := range []struct {
		api  API
		obj  string
		want Usage
	}{
		{Chat, `{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":20}}`,
			Usage{Input: 1000, CacheRead: 600, Output: 50, Reasoning: 20}}, // Chat has no cache-write count
		{Responses, `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":1050}`,
			Usage{Input: 1000, CacheRead: 600, Output: 50, Reasoning: 20}},
		// Messages leaves the cache's tokens out of input_tokens
		{Messages, `{"input_tokens":300,"cache_read_input_tokens":600,"cache_creation_input_tokens":100,"output_tokens":50}`,
			Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50}}, // no reasoning count
		{Converse, `{"inputTokens":300,"cacheReadInputTokens":600,"cacheWriteInputTokens":100,"outputTokens":50,"totalTokens":1050}`,
			Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50}},
		// Gemini counts thoughts apart from the candidates
		{Gemini, `{"promptTokenCount":1000,"cachedContentTokenCount":600,"candidatesTokenCount":30,"thoughtsTokenCount":20,"totalTokenCount":1050}`,
			Usage{Input: 1000, CacheRead: 600, Output: 50, Reasoning: 20}},
		// an answer whose API is unknown is read by its members' names
		{Other, `{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":600}}`, Usage{Input: 1000, CacheRead: 600, Output: 50}},
		{Other, `{"input_tokens":300,"cache_read_input_tokens":600,"cache_creation_input_tokens":100,"output_tokens":50}`, Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50}},
		{Other, `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":50}`, Usage{Input: 1000, CacheRead: 600, Output: 50}},
	} {
		got, ok := c.api.UsageOf([]byte(c.obj))
		if !ok || got != c.want {
			t.Errorf("%s %s: %+v, %v; want %+v", c.api, c.obj, got, ok, c.want)
		}
		if got.Total() != want.Total() {
			t.Errorf("%s: a budget counts %d, want %d (every prompt token, cached or not)", c.api, got.Total(), want.Total())
		}
	}
}

// What the writers write, each API's readers read back: a translated
// answer reports to its client what the engine reported to the gateway,
// the tokens written to a prompt cache included (they are priced apart:
// lost, a Chat client of a Messages engine was charged them as fresh
// input); only Messages has no reasoning count.
func TestUsageWrittenInEachClientAPIReadsBack(t *testing.T) {
	u := Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50, Reasoning: 20}
	for _, c := range []struct {
		api  API
		want Usage
	}{
		{Chat, u},
		{Completions, u},
		{Responses, u},
		{Messages, Usage{Input: 1000, CacheRead: 600, CacheWrite: 100, Output: 50}},
	} {
		b := c.api.AppendUsage(nil, u)
		if !json.Valid(b) {
			t.Fatalf("%s wrote %s", c.api, b)
		}
		if got, ok := c.api.UsageOf(b); !ok || got != c.want {
			t.Errorf("%s: %s reads back as %+v, want %+v", c.api, b, got, c.want)
		}
	}
	// an answer that wrote nothing to a cache reads as OpenAI's own
	if b := string(Chat.AppendUsage(nil, Usage{Input: 5, Output: 1})); strings.Contains(b, "cache_write") {
		t.Errorf("%s", b)
	}
}

func TestUsageReadersRefuseWhatIsNotAUsage(t *testing.T) {
	for _, obj := range []string{``, `null`, `[]`, `"usage"`, `{}`, `{"total_tokens":5}`} {
		for a := Other; a < count; a++ {
			if u, ok := a.UsageOf([]byte(obj)); ok {
				t.Errorf("%s reads %q as %+v", a, obj, u)
			}
		}
	}
	// a count is a non-negative integer: anything else counts nothing
	if u, _ := Chat.UsageOf([]byte(`{"prompt_tokens":-5,"completion_tokens":"7"}`)); u != (Usage{}) {
		t.Errorf("negative and string counts read as %+v", u)
	}
}

// A stream reports its counts in pieces: a later count replaces an
// earlier one, a missing one leaves it.
func TestUpdateKeepsTheLatestOfEachCount(t *testing.T) {
	start := Usage{Input: 1000, CacheRead: 600, Output: 1}
	got := start.Update(Usage{Output: 50, Reasoning: 20})
	if want := (Usage{Input: 1000, CacheRead: 600, Output: 50, Reasoning: 20}); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}

func TestEachAPIHasOneRow(t *testing.T) {
	seen := map[string]bool{}
	for a := Other; a < count; a++ {
		if a.String() == "" || seen[a.String()] {
			t.Errorf("API %d has the name %q", a, a.String())
		}
		seen[a.String()] = true
		apis, ok := Named(a.String())
		if !ok || (a != Other && (len(apis) != 1 || apis[0] != a)) {
			t.Errorf("`api %s` declares %v", a, apis)
		}
	}
	for _, a := range Preference {
		if !a.Conversation() {
			t.Errorf("%s is a translation target but not a conversation", a)
		}
	}
	if Messages.Errors() != AnthropicErrors || Responses.Errors() != ResponsesErrors || Chat.Errors() != OpenAIErrors {
		t.Error("error shapes")
	}
}

func BenchmarkReadChatUsage(b *testing.B) {
	obj := []byte(`{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":20}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Chat.UsageOf(obj); !ok {
			b.Fatal("no usage")
		}
	}
}
