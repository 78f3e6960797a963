package bedrock

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// FuzzEvents: whatever bytes a Bedrock (or a node posing as one) sends as
// its event stream, what reaches translation is whole SSE events, each an
// event line and one data line, as many as there were frames and no more
// than they said; a stream it cannot read ends in an error, never a panic
// or a half-written event.
func FuzzEvents(f *testing.F) {
	good := providertest.Frame(f, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)
	exc := providertest.Frame(f, "exception", "throttlingException", "{\n \"message\": \"slow down\"\n}")
	f.Add(good)
	f.Add(append(append([]byte{}, good...), exc...))
	f.Add(good[:20])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, stream []byte) {
		p := &Bedrock{Region: "us-east-1"}
		h := http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}
		got, _ := io.ReadAll(p.Events(h, io.NopCloser(bytes.NewReader(stream))))
		// An event says no more than its frame: its name and payload,
		// or an error frame's codes as a JSON message (where a control
		// character is escaped to six bytes).
		if len(got) > 6*len(stream)+64 {
			t.Fatalf("%d bytes of events from %d of stream", len(got), len(stream))
		}
		for rest := got; len(rest) > 0; {
			end := bytes.Index(rest, []byte("\n\n"))
			if end < 0 {
				t.Fatalf("an event without its end: %q", rest)
			}
			ev := rest[:end]
			rest = rest[end+2:]
			name, data, ok := bytes.Cut(ev, []byte("\n"))
			if !ok || !bytes.HasPrefix(name, []byte("event: ")) || !bytes.HasPrefix(data, []byte("data: ")) || bytes.ContainsAny(data, "\r\n") || bytes.ContainsRune(name, '\r') {
				t.Fatalf("not one event line and one data line: %q", ev)
			}
		}
	})
}
