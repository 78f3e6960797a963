package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Ten uploads of 40 MiB at once, through Caddy, under max_body_in_flight
// 128MiB: three are admitted whole and held while the engine answers, seven
// are 503 bodies_in_flight with Retry-After: 1 before a byte of them is
// read; they held 400 MiB at once before (issue 51). The clients send
// Expect: 100-continue, as curl does for a large body: over HTTP/1.1 the
// refusal then comes before the body is sent, where a client that sends it
// regardless meets the closed connection.
func TestTenLargeUploadsStayWithinTheBodiesInFlight(t *testing.T) {
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return
		}
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"text":"hello"}`)
	}))
	t.Cleanup(func() { once.Do(func() { close(release) }); up.Close() })
	startGateway(t, `
		max_body 48MiB
		max_body_in_flight 128MiB
		engine whisper {
			to `+up.URL+`
			models whisper-1
		}`)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("model", "whisper-1")
	fw, _ := mw.CreateFormFile("file", "speech.wav")
	fw.Write(bytes.Repeat([]byte("a"), 40<<20))
	mw.Close()
	body := b.Bytes()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}}
	statuses := make(chan int, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/audio/transcriptions", bytes.NewReader(body))
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("Expect", "100-continue")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				statuses <- 0
				return
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(out), "bodies_in_flight")) {
				t.Errorf("a refused upload: %v %s", resp.Header, out)
			}
			statuses <- resp.StatusCode
		})
	}
	got := map[int]int{}
	for n := 0; n < 10; n++ {
		select {
		case <-arrived:
			got[200]++
		case st := <-statuses:
			got[st]++
		}
	}
	if got[200] != 3 || got[http.StatusServiceUnavailable] != 7 {
		t.Fatalf("ten uploads of 40 MiB under 128 MiB in flight: %v", got)
	}

	// while the three are held, a prompt of 16 MiB is refused in its
	// client's own API: an OpenAI SDK's 503 bodies_in_flight, an Anthropic
	// SDK's 529 overloaded_error, each with Retry-After: 1
	ctx, prompt := context.Background(), strings.Repeat("a", 16<<20)
	expect := option.WithHeader("Expect", "100-continue")
	_, err := sdk("", option.WithHTTPClient(client), expect).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "whisper-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
	if e := apiError(t, err, http.StatusServiceUnavailable); e.Code != "bodies_in_flight" || e.Response.Header.Get("Retry-After") != "1" ||
		!strings.Contains(e.Message, "max_body_in_flight of 128MiB") {
		t.Fatalf("a chat prompt past the cap: %s %q, Retry-After %q", e.Code, e.Message, e.Response.Header.Get("Retry-After"))
	}
	p := messageParams("whisper-1")
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}
	ac := anthropic.NewClient(anthropicoption.WithHTTPClient(client), anthropicoption.WithBaseURL(gwURL+"/"),
		anthropicoption.WithAPIKey("none"), anthropicoption.WithMaxRetries(0), anthropicoption.WithHeader("Expect", "100-continue"))
	_, err = ac.Messages.New(ctx, p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 || ae.Type() != "overloaded_error" || ae.Response.Header.Get("Retry-After") != "1" ||
		!strings.Contains(ae.RawJSON(), "max_body_in_flight") {
		t.Fatalf("a Messages prompt past the cap: %v", err)
	}

	once.Do(func() { close(release) })
	wg.Wait()
	// what they held is given back: the same prompt now reaches the engine
	_, err = ac.Messages.New(ctx, p)
	if errors.As(err, &ae) && ae.StatusCode == 529 || len(arrived) != 1 {
		t.Fatalf("a Messages prompt once the uploads ended: %v, %d reached the engine", err, len(arrived))
	}
}
