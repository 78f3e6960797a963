//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

var (
	completionBody = []byte(`{"model":"bench","messages":[{"role":"user","content":"hi"}]}`)
	streamBody     = []byte(`{"model":"bench","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	doneEvent      = []byte("data: [DONE]\n\n")
)

const chatPath = "/v1/chat/completions"

// newClient is a keep-alive HTTP/1.1 client for up to conns connections to
// one target. Callers close its idle connections when a run ends, so no run
// inherits another's connections.
func newClient(conns int) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          conns + 16,
		MaxIdleConnsPerHost:   conns + 16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, tr
}

// newH2CClient speaks HTTP/2 without TLS (prior knowledge) to one target:
// thousands of streams over a few connections, for a Caddy whose file limit
// would not hold a connection per stream on both of its sides.
func newH2CClient() (*http.Client, *http.Transport) {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
		Protocols:             new(http.Protocols),
	}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}, tr
}

// streamAsk is a streamed request in one client API: its path, body and
// headers, and how a whole stream ends. The translation phase sends the
// same question as Chat, Messages and Responses; every other phase sends
// chatStream.
type streamAsk struct {
	path   string
	body   []byte
	header map[string]string
	// whole says whether a stream that ended cleanly ended as its API ends
	// a whole answer; tail is at least its last keep bytes
	whole func(tail []byte) bool
	keep  int
	// slack is how far the tail may grow past keep before it is cut back
	// to keep: a keep of kilobytes cut on every read would copy them per
	// event, on the cores Caddy runs on
	slack int
	last  string // the event that ends a whole stream, for the error that says it is missing
}

// chatStream is the benchmark's stream: Chat Completions, model bench.
var chatStream = streamAsk{path: chatPath, body: streamBody, keep: tailKept, last: "data: [DONE]",
	whole: func(tail []byte) bool { return bytes.HasSuffix(tail, doneEvent) }}

func post(ctx context.Context, c *http.Client, url string, body []byte, chunkDelay time.Duration) (*http.Response, error) {
	return postTo(ctx, c, url, chatPath, body, nil, chunkDelay)
}

func postTo(ctx context.Context, c *http.Client, url, path string, body []byte, header map[string]string, chunkDelay time.Duration) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if chunkDelay > 0 {
		req.Header.Set("X-Bench-Chunk-Delay", chunkDelay.String())
	}
	return c.Do(req)
}

// completeOnce sends one non-streaming completion and reads the whole answer.
func completeOnce(ctx context.Context, c *http.Client, url string) error {
	resp, err := post(ctx, c, url, completionBody, 0)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n == 0 {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

// streamResult is one SSE stream as the client saw it.
type streamResult struct {
	ttfb   time.Duration // request start to the first body byte (the first event)
	total  time.Duration // request start to the end of data: [DONE]
	chunks int           // chat.completion.chunk events received, [DONE] not counted
	err    error
}

// maxStreamReads bounds the read loop of one stream (50 events need a few dozen).
const maxStreamReads = 100_000

// streamOnce sends one "stream":true completion and reads it to the end.
// opened, when set, is called at the first body byte.
// tailKept is how much of a stream's end streamOnce keeps: enough for
// data: [DONE], and for the start of an error event that ended it instead.
const tailKept = 512

// lastEvent is the last event in tail, for a stream that did not end with
// data: [DONE]: a gateway's in-band error says why it ended.
func lastEvent(tail []byte) string {
	t := bytes.TrimRight(tail, "\n")
	if i := bytes.LastIndex(t, []byte("\n\n")); i >= 0 {
		t = t[i+2:]
	}
	if len(t) == 0 {
		return ""
	}
	return " (the last event: " + strconv.Quote(string(t)) + ")"
}

func streamOnce(ctx context.Context, c *http.Client, url string, chunkDelay time.Duration, opened func()) streamResult {
	return streamOnceAs(ctx, c, url, chatStream, chunkDelay, opened)
}

// streamOnceAs is streamOnce for the stream a asks for; chunks are then
// the events before the one that ends it.
func streamOnceAs(ctx context.Context, c *http.Client, url string, a streamAsk, chunkDelay time.Duration, opened func()) streamResult {
	start := time.Now()
	resp, err := postTo(ctx, c, url, a.path, a.body, a.header, chunkDelay)
	if err != nil {
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return streamResult{err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	var r streamResult
	var buf [16 << 10]byte
	var tail []byte // the last bytes seen, to find events split across reads
	events := 0
	for range maxStreamReads {
		n, err := resp.Body.Read(buf[:])
		if n > 0 {
			if r.ttfb == 0 {
				r.ttfb = time.Since(start)
				if opened != nil {
					opened()
				}
			}
			b := buf[:n]
			if len(tail) > 0 && tail[len(tail)-1] == '\n' && b[0] == '\n' {
				events++
			}
			events += bytes.Count(b, []byte("\n\n"))
			tail = append(tail, b...)
			if len(tail) > a.keep+a.slack {
				tail = append(tail[:0], tail[len(tail)-a.keep:]...)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.err = err
			break
		}
	}
	r.total = time.Since(start)
	switch {
	case r.err != nil:
	case !a.whole(tail):
		r.err = errors.New("stream ended without " + a.last + lastEvent(tail))
	default:
		r.chunks = events - 1
	}
	return r
}
