package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// Every in-band error in the client's own grammar: a stream whose headers
// went out and that is then cut or stalls ends, for a Chat client, with
// the data-only {"error":…} chunk; for a Messages client with
// `event: error`; for a Responses client with `event: error` and then
// `response.failed`, numbered after the events it had — and for all of
// them with an aborted connection, never a tidy end. One table, each
// client API against an engine that speaks Chat only (so the Messages and
// Responses clients are translated) and one that speaks Responses
// natively.
func TestAnInBandErrorIsInEachClientsGrammar(t *testing.T) {
	kinds := map[string]func(w http.ResponseWriter, r *http.Request){
		"cut": func(w http.ResponseWriter, r *http.Request) {
			inbandAnswer(w, r, false)
			panic(http.ErrAbortHandler) // the engine dies mid-answer
		},
		"stall": func(w http.ResponseWriter, r *http.Request) {
			inbandAnswer(w, r, false)
			<-r.Context().Done()
		},
	}
	clients := []struct{ api, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/v1/messages", `{"model":%q,"max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":%q,"stream":true,"input":"hi"}`},
	}
	for kind, script := range kinds {
		up := newRecorder(t, script)
		startGateway(t, fmt.Sprintf(`
		engine chatonly {
			to %s
			models ib-chat
			api chat
			stream_idle_timeout 300ms
		}
		engine respnative {
			to %s
			models ib-resp
			api responses
			stream_idle_timeout 300ms
		}`, up.URL, up.URL))
		for _, model := range []string{"ib-chat", "ib-resp"} {
			for _, c := range clients {
				t.Run(kind+"/"+model+"/"+c.api, func(t *testing.T) {
					resp, _ := postStream(t, c.path, fmt.Sprintf(c.body, model))
					events, err := sseEventsOf(resp.Body)
					if err == nil {
						t.Fatalf("the stream ended tidily: %v", events)
					}
					checkInband(t, c.api, events)
				})
			}
		}
	}
}

// The errors that can come after a waiting stream's preamble (its headers
// went out before any engine answered), in each client's grammar: an
// engine's error answer (upstream_error, with the engine's words) and an
// engine's refusal of the request (an older llama-server's 500
// "Unsupported param: tools", tools_not_supported), for a Chat client, a
// Messages client and a Responses client of a Chat-only engine. The
// engine answers only once the client has its preamble.
func TestAnErrorAfterThePreambleIsInEachClientsGrammar(t *testing.T) {
	held := make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(404) // the gateway's look at the engine, not a request
			return
		}
		body, _ := io.ReadAll(r.Body)
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"pre-fault"`) {
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`)
			return
		}
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"temperature out of range","type":"invalid_request_error"}}`)
	})
	startGateway(t, fmt.Sprintf(`
		engine old-llama {
			to %s
			models pre-status pre-fault
			api chat
		}`, up.URL))
	clients := []struct{ api, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/v1/messages", `{"model":%q,"max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":%q,"stream":true,"input":"hi"}`},
	}
	for _, kind := range []struct{ model, code, words string }{
		{"pre-status", "upstream_error", "temperature out of range"},
		{"pre-fault", "tools_not_supported", "Unsupported param: tools"},
	} {
		for _, c := range clients {
			t.Run(kind.code+"/"+c.api, func(t *testing.T) {
				resp, _ := postStream(t, c.path, fmt.Sprintf(c.body, kind.model)) // its headers: the preamble
				held <- struct{}{}
				events, err := sseEventsOf(resp.Body)
				if err != nil || len(events) == 0 {
					t.Fatalf("%v: %v", err, events)
				}
				n := len(events)
				last := events[n-1]
				switch c.api {
				case "chat":
					var o struct {
						Error struct{ Code, Message string } `json:"error"`
					}
					if last.name != "" || json.Unmarshal(last.data, &o) != nil || o.Error.Code != kind.code || !strings.Contains(o.Error.Message, kind.words) {
						t.Fatalf("chat's last event %s %s", last.name, last.data)
					}
				case "messages":
					var o struct {
						Type  string                         `json:"type"`
						Error struct{ Type, Message string } `json:"error"`
					}
					if last.name != "error" || json.Unmarshal(last.data, &o) != nil || o.Type != "error" || o.Error.Type == "" || !strings.Contains(o.Error.Message, kind.words) {
						t.Fatalf("messages' last event %s %s", last.name, last.data)
					}
				case "responses":
					var errEv struct{ Code, Message string }
					if n < 2 || events[n-2].name != "error" || last.name != "response.failed" ||
						json.Unmarshal(events[n-2].data, &errEv) != nil || errEv.Code != kind.code || !strings.Contains(errEv.Message, kind.words) {
						t.Fatalf("responses' last events %v", events)
					}
				}
			})
		}
	}
}

// A Responses client of the openai-go SDK: a cut stream's last events are
// the SDK's own error and response.failed types, and the stream ends in an
// error, never as a whole answer.
func TestAResponsesSDKReadsACutStreamAsAnError(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		inbandAnswer(w, r, false)
		panic(http.ErrAbortHandler)
	})
	startGateway(t, fmt.Sprintf(`
		engine chatonly {
			to %s
			models ib-sdk
			api chat
		}`, up.URL))
	stream := sdk("").Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "ib-sdk", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var kinds []string
	var failed responses.ResponseErrorEvent
	for stream.Next() {
		ev := stream.Current()
		kinds = append(kinds, ev.Type)
		if ev.Type == "error" {
			failed = ev.AsError()
		}
	}
	if stream.Err() == nil {
		t.Fatalf("the SDK saw a tidy end: %v", kinds)
	}
	if n := len(kinds); n < 2 || kinds[n-2] != "error" || kinds[n-1] != "response.failed" || failed.Code != "upstream_stream_cut" {
		t.Fatalf("events %v, error %+v", kinds, failed)
	}
	for _, k := range kinds {
		if k == "response.completed" {
			t.Fatalf("a cut answer was completed: %v", kinds)
		}
	}
}

// A Responses client of the Node SDK (its responses.stream helper): a cut
// stream of a Chat-only engine is raised as the gateway's in-band error
// (upstream_stream_cut, its code and message), after the text the client
// had, never as a final response.
func TestTheNodeSDKReadsACutResponsesStreamAsAnError(t *testing.T) {
	skipWithoutNodeSDK(t)
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		inbandAnswer(w, r, false)
		panic(http.ErrAbortHandler)
	})
	startGateway(t, fmt.Sprintf(`
		engine chatonly {
			to %s
			models ib-node
			api chat
		}`, up.URL))
	var text string
	var events []string
	var end nodeLine
	for l := range nodeResponses(t, gwURL+"/v1", "ib-node") {
		switch {
		case l.Delta != "":
			text += l.Delta
		case l.Event != "":
			events = append(events, l.Event+" "+l.Code)
		case l.End != "":
			end = l
		}
	}
	if text != "partial answer" || end.End != "error" || end.Code != "upstream_stream_cut" || !strings.Contains(end.Message, "chatonly") {
		t.Fatalf("the SDK had %q and ended with %+v; events %v", text, end, events)
	}
	// the error event is the last the helper reads: it ends the stream
	if n := len(events); n < 2 || events[n-1] != "error upstream_stream_cut" || events[n-2] != "response.output_text.delta " {
		t.Fatalf("events %v", events)
	}
}

// inbandAnswer writes the first part of an answer in the API the request
// asks (Chat or Responses) and flushes it: content reaches the client, so
// the stream is committed.
func inbandAnswer(w http.ResponseWriter, r *http.Request, _ bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	if strings.HasSuffix(r.URL.Path, "/responses") {
		io.WriteString(w, "event: response.created\ndata: "+`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`+"\n\n")
		io.WriteString(w, "event: response.output_item.added\ndata: "+`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}`+"\n\n")
		io.WriteString(w, "event: response.content_part.added\ndata: "+`{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`+"\n\n")
		io.WriteString(w, "event: response.output_text.delta\ndata: "+`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"partial"}`+"\n\n")
	} else {
		io.WriteString(w, chunk("partial")+chunk(" answer"))
	}
	w.(http.Flusher).Flush()
}

// sseEvent is one event a client read: its name and its data.
type sseEvent struct {
	name string
	data json.RawMessage
}

// sseEventsOf reads a stream to its end: the events, and nil for a tidy
// end or the error that ended it.
func sseEventsOf(body io.ReadCloser) ([]sseEvent, error) {
	defer body.Close()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.data != nil {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		}
	}
	err := sc.Err()
	if err == nil {
		return out, nil
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected EOF") {
		return out, io.ErrUnexpectedEOF
	}
	return out, err
}

// checkInband checks a cut stream's last events are the client API's own
// in-band error.
func checkInband(t *testing.T, api string, events []sseEvent) {
	t.Helper()
	n := len(events)
	if n == 0 {
		t.Fatal("no events")
	}
	last := events[n-1]
	switch api {
	case "chat":
		var o struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if last.name != "" || json.Unmarshal(last.data, &o) != nil || o.Error.Code != "upstream_stream_cut" {
			t.Fatalf("chat's last event %s %s", last.name, last.data)
		}
	case "messages":
		var o struct {
			Type  string                `json:"type"`
			Error struct{ Type string } `json:"error"`
		}
		if last.name != "error" || json.Unmarshal(last.data, &o) != nil || o.Type != "error" {
			t.Fatalf("messages' last event %s %s", last.name, last.data)
		}
	case "responses":
		if n < 2 || events[n-2].name != "error" || last.name != "response.failed" {
			t.Fatalf("responses' last events %v", events)
		}
		var errEv, failed struct {
			Code string `json:"code"`
			Seq  int    `json:"sequence_number"`
		}
		if json.Unmarshal(events[n-2].data, &errEv) != nil || errEv.Code != "upstream_stream_cut" || json.Unmarshal(last.data, &failed) != nil {
			t.Fatalf("responses' error %s", events[n-2].data)
		}
		// numbered after what the client had
		var before struct {
			Seq int `json:"sequence_number"`
		}
		if n < 3 || json.Unmarshal(events[n-3].data, &before) != nil || errEv.Seq != before.Seq+1 || failed.Seq != errEv.Seq+1 {
			t.Fatalf("sequence numbers: %s, then %s, then %s", events[n-3].data, events[n-2].data, last.data)
		}
	}
}

// postStream posts a streamed request and returns its response, whose
// body the caller reads.
func postStream(t *testing.T, path, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gwURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return resp, nil
}
