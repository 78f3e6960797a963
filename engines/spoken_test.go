package engines

import (
	"context"
	"slices"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

func TestAnEngineWithoutAnAPILineLearnsWhatItDoesNotSpeak(t *testing.T) {
	e, err := New(Config{Name: "old-llama", To: "http://127.0.0.1:1", Models: []string{"m"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := e.Reads(api.Messages); !ok || in != api.Messages {
		t.Fatalf("before learning: reads Messages in %v, %v; want natively", in, ok)
	}
	if !e.Learn(UnspokenAPI(api.Messages)) || e.Learn(UnspokenAPI(api.Messages)) {
		t.Fatal("Learn says news once, and only once")
	}
	if in, ok := e.Reads(api.Messages); !ok || in != api.Chat {
		t.Fatalf("after learning: reads Messages in %v, %v; want through Chat", in, ok)
	}
	if e.Speaks(api.Messages) || !e.Speaks(api.Chat) {
		t.Fatal("Speaks disagrees with what was learned")
	}
	e.Learn(UnspokenAPI(api.Responses) | UnspokenCountTokens)
	if got := e.Status().Unspoken; !slices.Equal(got, []string{"responses", "messages", "count_tokens"}) {
		t.Fatalf("status says %q", got)
	}
	e.Learn(UnspokenAPI(api.Chat))
	if in, ok := e.Reads(api.Chat); ok {
		t.Fatalf("an engine learned to speak none of the three reads Chat in %v", in)
	}
}

func TestARestartForgetsWhatWasLearned(t *testing.T) {
	e := testEngine(t, "forgets", nil)
	l, err := e.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	e.Learn(UnspokenAPI(api.Responses))
	if err := e.Stop(context.Background(), true, StopAdmin); err != nil {
		t.Fatal(err)
	}
	if !e.Unspoken().Has(UnspokenAPI(api.Responses)) {
		t.Fatal("a stopped engine forgot before its next process")
	}
	l, err = e.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if u := e.Unspoken(); u != 0 {
		t.Fatalf("a new process starts knowing %q", u.Names())
	}
}
