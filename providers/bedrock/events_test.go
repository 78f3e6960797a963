package bedrock

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

func TestBedrockEventsAreSSE(t *testing.T) {
	providertest.AWSKeys.Env(t)
	srv := providertest.Bedrock(t, "stream-cut")
	p := &Bedrock{Region: "us-east-1"}
	resp, body := bdSend(t, p, srv, providertest.BedrockModel, true)
	got, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	// the fake's frames, each an SSE event of its type, the exception's too
	half := providertest.BedrockText[:len(providertest.BedrockText)/2]
	want := "event: messageStart\ndata: {\"p\":\"abcdefghijk\",\"role\":\"assistant\"}\n\n" +
		"event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"" + half + "\"},\"p\":\"abcd\"}\n\n" +
		"event: throttlingException\ndata: {\"message\":\"Too many tokens, please wait before trying again.\"}\n\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %s", ct)
	}
}

func TestBedrockEventsBrokenFrames(t *testing.T) {
	p := &Bedrock{Region: "us-east-1"}
	good := providertest.Frame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)
	bad := providertest.Frame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Ho"}}`)
	bad[len(bad)-8] ^= 0xff // a payload byte: the message CRC fails
	for name, c := range map[string]struct {
		stream []byte
		want   error
	}{
		"crc": {append(append([]byte{}, good...), bad...), eventstream.ChecksumError{}},
		"cut": {append(append([]byte{}, good...), good[:20]...), io.ErrUnexpectedEOF},
	} {
		h := http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}
		got, err := io.ReadAll(p.Events(h, io.NopCloser(bytes.NewReader(c.stream))))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
		}
		if string(got) != "event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hi\"}}\n\n" {
			t.Errorf("%s: before the broken frame: %q", name, got)
		}
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if b, _ := io.ReadAll(p.Events(h, io.NopCloser(strings.NewReader(`{"message":"x"}`)))); string(b) != `{"message":"x"}` {
		t.Errorf("a JSON body: %q", b)
	}
}

// TestBedrockFrameOverTheCapIsRefusedUnread: a frame whose prelude says it
// is 15 MB is refused from its prelude, with what was before it passed on,
// and without reading (or allocating for) its payload.
func TestBedrockFrameOverTheCapIsRefusedUnread(t *testing.T) {
	p := &Bedrock{Region: "us-east-1"}
	good := providertest.Frame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)
	huge := providertest.Frame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+strings.Repeat("a", 15<<20)+`"}}`)
	body := &countingReader{r: bytes.NewReader(append(append([]byte{}, good...), huge...))}
	h := http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}
	events := p.Events(h, io.NopCloser(body))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := io.ReadAll(events)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err %v", err)
	}
	if string(got) != "event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hi\"}}\n\n" {
		t.Errorf("before the huge frame: %q", got)
	}
	if body.n > int64(len(good))+64<<10 {
		t.Errorf("%d bytes of the body read, the huge frame's payload among them", body.n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("%d KiB allocated reading the stream", alloc>>10)
	}
	// a frame at the cap's size still passes
	edge := providertest.Frame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+strings.Repeat("a", maxFrame-256)+`"}}`)
	if got, err := io.ReadAll(p.Events(h, io.NopCloser(bytes.NewReader(edge)))); err != nil || len(got) < maxFrame-256 {
		t.Errorf("a frame under the cap: %d bytes, %v", len(got), err)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
