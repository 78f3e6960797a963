package caddymodule

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An engine whose first token takes 20 s, hedged after 300ms to a fallback
// that answers at once: a client of the OpenAI SDK gets the fallback's
// answer, streamed and whole, long before the slow engine would have
// said anything, and the slow attempt is cancelled (a loser is observed).
func TestASlowFirstTokenIsHedgedToTheFallback(t *testing.T) {
	startGateway(t, `
		engine slow {
			`+engineCmd("--first-token-delay 20s")+`
			models m
			fallback fast
			hedge_after 300ms
			hedge_budget 100%
		}
		engine fast {
			`+engineCmd(`--reply "from the fast one"`)+`
			models fast
			preload
		}`)
	awaitState(t, "fast", "ready")
	before := scrape(t)
	client := sdk("unused")
	for i, stream := range []bool{true, false, true} {
		start := time.Now()
		var text string
		if stream {
			s := client.Chat.Completions.NewStreaming(context.Background(), chatParams("m", "hi"))
			var err error
			if text, err = readStream(s); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		} else {
			c, err := client.Chat.Completions.New(context.Background(), chatParams("m", "hi"))
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			text = c.Choices[0].Message.Content
		}
		if took := time.Since(start); took >= 20*time.Second {
			t.Fatalf("request %d took %s: it waited for the slow engine", i, took)
		}
		if !strings.Contains(text, "from the fast one") {
			t.Fatalf("request %d: %q", i, text)
		}
	}
	after := scrape(t)
	won := sample(t, after, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`) -
		sample(t, before, "llm_gateway_hedges_total", `engine="slow",winner="hedge"`)
	if won != 3 {
		t.Fatalf("hedges won %v, want 3\n%s", won, grepLines(after, "hedge"))
	}
	if !strings.Contains(after, `llm_gateway_hedge_loser_seconds_count{engine="slow"}`) {
		t.Fatalf("no loser observed:\n%s", grepLines(after, "hedge"))
	}
}
