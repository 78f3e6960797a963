package translatetest

import (
	"errors"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// BenchStream measures one streamed event, delta, translated from from to
// to as the gateway's relay does: a pooled Stream begun with prelude and
// reset every 1000 events (a long answer), writing into a reused buffer,
// every buffer at its size before the timer starts.
func BenchStream(b *testing.B, from, to api.API, o translate.StreamOptions, prelude [][]byte, delta []byte) {
	s := translate.NewStream(from, to, o)
	out := make([]byte, 0, 64<<10)
	start := func() {
		s.Reset(from, to, o)
		for _, ev := range prelude {
			out = s.Event(out[:0], ev)
		}
	}
	for range 2 { // warm: every buffer at its size
		start()
		for range 1000 {
			out = s.Event(out[:0], delta)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(delta)))
	b.ResetTimer()
	for i := range b.N {
		if i%1000 == 0 {
			start()
		}
		out = s.Event(out[:0], delta)
	}
}

// CheckMedia asserts what translate.CheckMedia says of a request body of
// API a: nothing when member is "", else a *translate.MediaError naming
// member and kind, which it returns for the caller's further checks.
func CheckMedia(t *testing.T, a api.API, body string, allow []string, member, kind string) error {
	t.Helper()
	err := translate.CheckMedia(a, []byte(body), allow)
	if member == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return nil
	}
	var me *translate.MediaError
	if !errors.As(err, &me) || me.Member != member || me.Kind != kind {
		t.Fatalf("%v, want %s refused (%q)", err, member, kind)
	}
	return err
}
