package apierror

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// sseEvents splits a stream into its events: each one's `event:` name
// (empty when it has none) and its data.
func sseEvents(t *testing.T, b []byte) (names []string, data []json.RawMessage) {
	t.Helper()
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		var name, d string
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				d += v
			}
		}
		if !json.Valid([]byte(d)) {
			t.Fatalf("event %q: data is not JSON", ev)
		}
		names, data = append(names, name), append(data, json.RawMessage(d))
	}
	return names, data
}

// An error inside a stream, in the grammar of each client API: the one
// table of in-band errors.
func TestAnInBandErrorIsInTheClientsOwnGrammar(t *testing.T) {
	e := &Error{Status: http.StatusServiceUnavailable, Type: TypeUnavailable, Code: "gateway_going_away", Message: `the gateway is going away: send the request again`}
	for _, c := range []struct {
		api   api.API
		names []string
		check func(t *testing.T, data []json.RawMessage)
	}{
		{api.Chat, []string{""}, func(t *testing.T, data []json.RawMessage) {
			var o struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			if json.Unmarshal(data[0], &o) != nil || o.Error.Code != e.Code || o.Error.Message != e.Message {
				t.Errorf("chat: %s", data[0])
			}
		}},
		{api.Messages, []string{"error"}, func(t *testing.T, data []json.RawMessage) {
			var o struct {
				Type  string                `json:"type"`
				Error struct{ Type string } `json:"error"`
			}
			if json.Unmarshal(data[0], &o) != nil || o.Type != "error" || o.Error.Type != "overloaded_error" {
				t.Errorf("messages: %s", data[0])
			}
		}},
		{api.Responses, []string{"error", "response.failed"}, func(t *testing.T, data []json.RawMessage) {
			var ev struct {
				Type, Code, Message string
				Seq                 int `json:"sequence_number"`
			}
			if json.Unmarshal(data[0], &ev) != nil || ev.Type != "error" || ev.Code != e.Code || ev.Message != e.Message || ev.Seq != 7 {
				t.Errorf("responses error: %s", data[0])
			}
			var failed struct {
				Type     string `json:"type"`
				Seq      int    `json:"sequence_number"`
				Response struct {
					Status string                         `json:"status"`
					Error  struct{ Code, Message string } `json:"error"`
				} `json:"response"`
			}
			if json.Unmarshal(data[1], &failed) != nil || failed.Type != "response.failed" || failed.Seq != 8 ||
				failed.Response.Status != "failed" || failed.Response.Error.Code != e.Code {
				t.Errorf("responses failed: %s", data[1])
			}
		}},
	} {
		names, data := sseEvents(t, e.EventAs(c.api, 7))
		if strings.Join(names, ",") != strings.Join(c.names, ",") {
			t.Errorf("%s: events %q, want %q", c.api, names, c.names)
			continue
		}
		c.check(t, data)
	}
}

func TestAnErrorAnswerIsInTheClientsOwnShape(t *testing.T) {
	e := &Error{Status: http.StatusServiceUnavailable, Type: TypeUnavailable, Code: "no_engine", Message: "m"}
	for _, c := range []struct {
		api    api.API
		status int
		body   string
	}{
		{api.Chat, 503, `{"error":{"message":"m","type":"service_unavailable","code":"no_engine"}}`},
		{api.Responses, 503, `{"error":{"message":"m","type":"service_unavailable","code":"no_engine"}}`},
		{api.Messages, 529, `{"type":"error","error":{"type":"overloaded_error","message":"m"}}`},
	} {
		w := httptest.NewRecorder()
		e.WriteAs(w, c.api)
		if w.Code != c.status || !bytes.Equal(bytes.TrimSpace(w.Body.Bytes()), []byte(c.body)) {
			t.Errorf("%s: %d %s", c.api, w.Code, w.Body)
		}
	}
}
