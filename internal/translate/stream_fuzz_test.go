package translate_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

var stDirections = [...][2]api.API{
	{api.Chat, api.Messages}, {api.Messages, api.Chat}, {api.Chat, api.Responses},
	{api.Responses, api.Chat}, {api.Messages, api.Responses}, {api.Responses, api.Messages},
}

// FuzzStream feeds arbitrary bytes, split into events as the gateway
// splits them, in any direction: nothing panics, and every event the
// client gets is complete, of known lines only, with data that is JSON or
// [DONE].
func FuzzStream(f *testing.F) {
	captures, _ := filepath.Glob(filepath.Join("testdata", "streams", "*.sse"))
	for _, c := range captures {
		b, err := os.ReadFile(c)
		if err != nil {
			f.Fatal(err)
		}
		for d := range stDirections {
			if stDirections[d][0].String() == filepath.Base(c)[:len(stDirections[d][0].String())] {
				f.Add(uint8(d), true, b)
			}
		}
	}
	f.Add(uint8(0), false, []byte(": hi\r: x\rdata: {}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, dir uint8, usage bool, upstream []byte) {
		d := stDirections[int(dir)%len(stDirections)]
		s := translate.NewStream(d[0], d[1], translate.StreamOptions{IncludeUsage: usage, CustomTools: []string{"get_time"}})
		r := sse.NewReader(bytes.NewReader(upstream))
		defer r.Release()
		var out []byte
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				out = s.End(out)
				break
			}
			if err != nil {
				break
			}
			out = s.Event(out, ev)
		}
		if bytes.IndexByte(out, '\r') >= 0 {
			t.Fatalf("a CR in the client's stream: %q", out)
		}
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("the client's stream ends mid-event: %q", out)
		}
		translatetest.Split(t, out)
	})
}
