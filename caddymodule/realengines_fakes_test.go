package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Fakes that answer as the real engines' sources say they do
// (docs/translation-facts.md#engines-own-words), for the tests of what an
// engine speaks, count_tokens and stop reasons: an older llama-server
// (Chat Completions only, its own 404 for the other APIs, 500 "Unsupported
// param: tools" without --jinja, /tokenize), an older vLLM (Chat
// Completions with stop_reason, /tokenize with its count, FastAPI's 404)
// and ollama 0.14 (Chat and Messages, but no count_tokens and no
// /tokenize: gin's "404 page not found").

// fakeSaid is what every fake generates: the stop strings of a request cut
// it where they first match.
const fakeSaid = "one, two, three, four"

// cutAtStop is text cut before the first of stops it contains, and the
// stop that matched ("" for none).
func cutAtStop(text string, stops []string) (string, string) {
	at, matched := len(text), ""
	for _, s := range stops {
		if i := strings.Index(text, s); s != "" && i >= 0 && i < at {
			at, matched = i, s
		}
	}
	return text[:at], matched
}

// fakeChatRequest is what the fakes read of a Chat Completions request.
type fakeChatRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Stop   json.RawMessage `json:"stop"`
	Tools  json.RawMessage `json:"tools"`
}

// stops is the request's stop, a string or a list.
func (r fakeChatRequest) stops() []string {
	var one string
	if json.Unmarshal(r.Stop, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(r.Stop, &many)
	return many
}

// llamaNotFound is llama-server's answer for a path it has no route for:
// plain text before April 2024, then an OpenAI-shaped error.
func llamaNotFound(w http.ResponseWriter, plain bool) {
	if plain {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(404)
		io.WriteString(w, "File Not Found")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(404)
	io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
}

// olderLlamaServer is a llama-server of 2024 (plain: of before April
// 2024) started without --jinja.
func olderLlamaServer(t *testing.T, plain bool) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/health":
			io.WriteString(w, `{"status":"ok"}`)
		case "/tokenize":
			var tr struct {
				Content string `json:"content"`
			}
			json.Unmarshal(body, &tr)
			var ids []string
			for i := range strings.Fields(tr.Content) {
				ids = append(ids, fmt.Sprint(1000+i))
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, `{"tokens":[`+strings.Join(ids, ",")+`]}`)
		case "/v1/chat/completions", "/chat/completions":
			var req fakeChatRequest
			json.Unmarshal(body, &req)
			if len(req.Tools) > 0 && string(req.Tools) != "null" {
				// utils.hpp's oaicompat_completion_params_parse without --jinja
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(500)
				io.WriteString(w, `{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`)
				return
			}
			text, _ := cutAtStop(fakeSaid, req.stops())
			fakeChatAnswer(w, req, text, "stop", "")
		default:
			llamaNotFound(w, plain)
		}
	})
}

// olderVLLM is a vLLM from before its Responses (v0.10) and Messages APIs.
func olderVLLM(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(200)
		case "/tokenize":
			var tr struct {
				Messages []json.RawMessage `json:"messages"`
				Prompt   *string           `json:"prompt"`
			}
			json.Unmarshal(body, &tr)
			// its chat template: the messages rendered, ten tokens each
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"count":%d,"max_model_len":32768,"tokens":[],"token_strs":null}`, 10*len(tr.Messages))
		case "/v1/chat/completions":
			var req fakeChatRequest
			json.Unmarshal(body, &req)
			text, matched := cutAtStop(fakeSaid, req.stops())
			fakeChatAnswer(w, req, text, "stop", matched)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"detail":"Not Found"}`)
		}
	})
}

// ollama014 is ollama 0.14: Chat Completions and Messages, no
// count_tokens, no tokenizer route.
func ollama014(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			io.WriteString(w, "Ollama is running")
		case "/v1/chat/completions":
			var req fakeChatRequest
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &req)
			fakeChatAnswer(w, req, fakeSaid, "stop", "")
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(404)
			io.WriteString(w, "404 page not found")
		}
	})
}

// fakeChatAnswer answers a Chat Completions request with text, JSON or
// streamed, vLLM's stop_reason set to matched when it is not "".
func fakeChatAnswer(w http.ResponseWriter, req fakeChatRequest, text, finish, matched string) {
	stop := "null"
	if matched != "" {
		b, _ := json.Marshal(matched)
		stop = string(b)
	}
	usage := `{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}`
	if !req.Stream {
		c, _ := json.Marshal(text)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-f","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s},"logprobs":null,"finish_reason":%q,"stop_reason":%s}],"usage":%s}`,
			req.Model, c, finish, stop, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, word := range strings.SplitAfter(text, " ") {
		c, _ := json.Marshal(word)
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-f\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"logprobs\":null,\"finish_reason\":null}]}\n\n", req.Model, c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-f\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":%q,\"stop_reason\":%s}]}\n\n", req.Model, finish, stop)
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-f\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", req.Model, usage)
	io.WriteString(w, "data: [DONE]\n\n")
}

// paths are the paths rec was sent, without readiness probes.
func paths(rec *recorder) []string {
	var out []string
	for _, r := range rec.all() {
		if r.path != "/" {
			out = append(out, r.path)
		}
	}
	return out
}
