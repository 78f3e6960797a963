package bedrock

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// Bedrock's ConverseStream answers in AWS's binary event stream
// (application/vnd.amazon.eventstream), decoded here with the AWS SDK's own
// eventstream package into SSE events, which translation reads as Converse's
// grammar (internal/translate's stream_converse.go).

// Events reads a ConverseStream answer (application/vnd.amazon.eventstream)
// as SSE events; any other body (an error's JSON) is left as it is.
func (*Bedrock) Events(h http.Header, body io.ReadCloser) io.ReadCloser {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "application/vnd.amazon.eventstream" {
		return body
	}
	h.Set("Content-Type", "text/event-stream")
	h.Del("Content-Length")
	return &eventStream{body: body, r: bufio.NewReader(body), dec: eventstream.NewDecoder()}
}

// eventStream turns AWS's event stream into SSE, frame by frame: each
// frame is one event, "event: <type>\ndata: <JSON payload>\n\n", named by
// its :event-type, or by its :exception-type for an exception. A frame
// whose checksum fails, or that the body cuts short, is a read error: the
// gateway then cuts the client's stream rather than pass on a guess.
type eventStream struct {
	body    io.ReadCloser
	r       *bufio.Reader
	dec     *eventstream.Decoder
	payload []byte // the decoder's buffer, reused frame after frame
	out     []byte
	off     int
	err     error
}

func (e *eventStream) Read(p []byte) (int, error) {
	for e.off == len(e.out) {
		if e.err != nil {
			return 0, e.err
		}
		e.out, e.off = e.out[:0], 0
		e.err = e.next()
	}
	n := copy(p, e.out[e.off:])
	e.off += n
	return n, nil
}

// maxFrame bounds one frame of the event stream, read from its prelude
// before any of it is buffered: it becomes one SSE event, which is at most
// sse.MaxEventSize after it (the gateway cuts a larger one), and AWS's
// decoder reads a frame's payload whole, growing a buffer as it goes, for
// up to the 16 MiB its format allows (issue 51: a 15 MB frame cost ~10 MB
// per stream before the cut). Bedrock's own events are a few hundred bytes.
const maxFrame = sse.MaxEventSize

// ErrFrameTooLarge cuts an event stream whose frame says it is over maxFrame.
var ErrFrameTooLarge = errors.New("a frame larger than 1 MiB, the cap of one event")

// next decodes one frame into e.out.
func (e *eventStream) next() error {
	// The prelude's first 4 bytes are the frame's total length, big-endian
	// (its checksum comes later: a length that lies is refused either way).
	if p, err := e.r.Peek(4); err == nil && binary.BigEndian.Uint32(p) > maxFrame {
		return fmt.Errorf("bedrock event stream: %w (%d bytes)", ErrFrameTooLarge, binary.BigEndian.Uint32(p))
	}
	cr := &countReader{r: e.r}
	m, err := e.dec.Decode(cr, e.payload[:0])
	if err != nil {
		if errors.Is(err, io.EOF) && cr.n == 0 {
			return io.EOF // the stream ended between frames
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("bedrock event stream: %w", err)
	}
	e.payload = m.Payload // at most maxFrame: the buffer kept between frames is bounded too
	var name string
	payload := m.Payload
	switch headerString(m.Headers, ":message-type") {
	case "event":
		name = headerString(m.Headers, ":event-type")
	case "exception":
		name = headerString(m.Headers, ":exception-type")
	case "error":
		// The event stream's own error frame (:error-code,
		// :error-message, no payload): an internal error, as Bedrock's
		// exceptions say it.
		name = "internalServerException"
		payload, _ = json.Marshal(map[string]string{
			"message": headerString(m.Headers, ":error-code") + ": " + headerString(m.Headers, ":error-message"),
		})
	}
	if name == "" {
		return nil // nothing to say: the next Read reads the next frame
	}
	e.out = append(e.out, "event: "...)
	e.out = appendLine(e.out, name)
	e.out = append(e.out, "\ndata: "...)
	e.out = appendPayload(e.out, payload)
	e.out = append(e.out, "\n\n"...)
	return nil
}

func (e *eventStream) Close() error { return e.body.Close() }

// headerString is a string header's value, "" for none.
func headerString(hs eventstream.Headers, name string) string {
	if v, ok := hs.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

// appendLine appends s without the line breaks that would end an SSE
// line early.
func appendLine(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != '\n' && s[i] != '\r' {
			dst = append(dst, s[i])
		}
	}
	return dst
}

// appendPayload appends a payload as one data line: JSON compacted if it
// has line breaks (in JSON they can only be white space), {} for none.
func appendPayload(dst, payload []byte) []byte {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 {
		return append(dst, "{}"...)
	}
	if !bytes.ContainsAny(payload, "\r\n") {
		return append(dst, payload...)
	}
	var b bytes.Buffer
	if json.Compact(&b, payload) == nil {
		return append(dst, b.Bytes()...)
	}
	return appendLine(dst, string(payload))
}

// countReader counts what a frame's decoding read, to tell a stream that
// ended between frames from one cut inside a frame.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
