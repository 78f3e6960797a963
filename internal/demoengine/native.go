package demoengine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// llama-server's own endpoints and an audio transcription endpoint, so that
// the gateway's routes beyond chat (extra_paths, multipart bodies and the
// /upstream/ passthrough) can be tried end to end on the demo engine.

func (s *server) nativeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /props", s.props)
	mux.HandleFunc("GET /slots", s.slots)
	mux.HandleFunc("GET /{$}", s.index)
	for _, p := range []string{"/completion", "/infill", "/rerank", "/v1/rerank", "/tokenize", "/detokenize", "/embedding"} {
		mux.HandleFunc("POST "+p, s.native)
	}
	mux.HandleFunc("POST /v1/audio/transcriptions", s.transcribe)
}

// index is the engine's web page, as llama-server serves its UI at /.
func (s *server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>demo engine</title><h1>demo engine: %s</h1>\n", s.o.Model)
}

func (s *server) props(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": s.o.Model, "total_slots": 1, "build_info": "llm-demo-engine",
		"default_generation_settings": map[string]any{"n_ctx": 4096},
	})
}

func (s *server) slots(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	// its slots (--slots), the first ones busy while it answers requests
	// (it never queues: past its slots, the list just says all are busy)
	busy := int(s.processing.Load())
	list := make([]any, max(1, s.o.Slots))
	for i := range list {
		list[i] = map[string]any{"id": i, "id_task": -1, "n_ctx": 4096, "is_processing": i < busy}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.o.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.o.APIKey {
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid api key")
		return false
	}
	return true
}

// native answers llama-server's non-OpenAI endpoints with the path, the
// model asked for and the body's other members, so tests can see what
// arrived.
func (s *server) native(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !s.gate(w, r) {
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	out := map[string]any{"endpoint": r.URL.Path, "model": req["model"], "served_by": s.o.Model}
	switch r.URL.Path {
	case "/rerank", "/v1/rerank":
		docs, _ := req["documents"].([]any)
		results := []any{}
		for i := range docs {
			results = append(results, map[string]any{"index": i, "relevance_score": 1 / float64(i+1)})
		}
		out["results"] = results
	case "/tokenize":
		content, _ := req["content"].(string)
		tokens := []int{}
		for i := range strings.Fields(content) {
			tokens = append(tokens, 100+i)
		}
		out["tokens"] = tokens
	default:
		out["content"] = s.o.Reply
		if s.o.Reply == "" {
			out["content"] = "demo completion"
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// transcribe answers an OpenAI audio transcription with what it received:
// the model field, the file's name, size and SHA-256, and the SHA-256 of the
// whole body, so a test can check the upload arrived byte for byte.
func (s *server) transcribe(w http.ResponseWriter, r *http.Request) {
	if !s.gate(w, r) {
		return
	}
	h := sha256.New()
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, h), r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "not a multipart body: "+err.Error())
		return
	}
	fields := map[string]string{}
	var fileName, fileSum string
	var fileSize int64
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "bad multipart body: "+err.Error())
			return
		}
		if p.FileName() != "" {
			fh := sha256.New()
			fileSize, _ = io.Copy(fh, p)
			fileName, fileSum = p.FileName(), hex.EncodeToString(fh.Sum(nil))
			continue
		}
		v, _ := io.ReadAll(io.LimitReader(p, 1<<20))
		fields[p.FormName()] = string(v)
	}
	_, _ = io.Copy(io.Discard, r.Body) // the epilogue, for the body's hash
	writeJSON(w, http.StatusOK, map[string]any{
		"text":        fmt.Sprintf("heard %d bytes of %s", fileSize, fileName),
		"model":       fields["model"],
		"file_sha256": fileSum,
		"body_sha256": hex.EncodeToString(h.Sum(nil)),
		"fields":      fields,
	})
}
