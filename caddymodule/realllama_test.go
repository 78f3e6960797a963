package caddymodule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/testdata/tinygguf"
)

// The TestRealLlamaServer tests run the gateway in front of a real
// llama.cpp llama-server that it starts on demand, with the tiny
// random-weight model of testdata/tinygguf. They are opt-in: no registry
// ships llama-server, and building one takes a while (docs/real-engines.md),
// so they run only when LLAMA_SERVER names the binary. The model's text is
// garbage: they compare the gateway's answers with the engine's own, and
// read the engine's own counters, never the text's meaning.

// llamaServer is a llama-server binary and a directory with the tiny model
// and a slot directory.
type llamaServer struct {
	bin, gguf, slots string
}

// realLlamaServer is the llama-server LLAMA_SERVER names, with the tiny
// model written; without it the test is skipped.
func realLlamaServer(t *testing.T) llamaServer {
	t.Helper()
	bin := os.Getenv("LLAMA_SERVER")
	if bin == "" {
		t.Skip("real llama-server test: set LLAMA_SERVER=/path/to/llama-server to run it (docs/real-engines.md)")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("LLAMA_SERVER=%s is not an executable file (%v)", bin, err)
	}
	dir := t.TempDir()
	l := llamaServer{bin: abs, gguf: filepath.Join(dir, "tiny.gguf"), slots: filepath.Join(dir, "slots")}
	if err := tinygguf.WriteFile(l.gguf); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(l.slots, 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// engine is an engine block running llama-server with two slots, its
// /slots and /metrics on, and slot files in the test's directory; extra
// lines go inside the block. Every engine is stopped when the test ends.
func (l llamaServer) engine(t *testing.T, name, model, extra string) string {
	t.Cleanup(func() { stopEngine(t, name) })
	return fmt.Sprintf(`
		engine %s {
			cmd %s -m %s --host 127.0.0.1 --port {engine.port} -c 2048 -np 2 --slots --metrics --slot-save-path %s
			to http://127.0.0.1:{engine.port}
			models %s
			start_timeout 1m
			signals metrics
			%s
		}`, name, caddyQuote(l.bin), caddyQuote(l.gguf), caddyQuote(l.slots), model, extra)
}

// llamaChat is a short greedy chat body: the same prompt gets the same
// answer from the gateway and from the engine directly.
func llamaChat(model, msg string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":8,"temperature":0,"seed":1,"cache_prompt":true,"stream":%t}`, model, msg, stream)
}

// direct POSTs body to the engine listening on port, as a client of the
// engine itself would.
func direct(t *testing.T, port int, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

// engineMetric is the value of a llama-server metric on port's /metrics
// (llamacpp:prompt_tokens_total), -1 when it is absent.
func engineMetric(t *testing.T, port int, name string) float64 {
	t.Helper()
	_, body := do(t, mustReq(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics"))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// answerOf is an OpenAI chat answer's text, finish reason and usage.
func answerOf(t *testing.T, body string) string {
	t.Helper()
	var a struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.Choices) != 1 {
		t.Fatalf("not one chat answer (%v): %s", err, body)
	}
	return fmt.Sprintf("%q %s prompt=%d completion=%d", a.Choices[0].Message.Content, a.Choices[0].FinishReason, a.Usage.Prompt, a.Usage.Completion)
}

// streamOf is an SSE chat stream's text, its chunk count and how it ended.
func streamOf(t *testing.T, body string) string {
	t.Helper()
	var text strings.Builder
	chunks, done := 0, false
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("a stream event that is not JSON: %q", data)
		}
		chunks++
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	return fmt.Sprintf("%q in %d chunks, [DONE] %t", text.String(), chunks, done)
}

// A llama-server started by the first request answers through the gateway
// as it answers directly, JSON and SSE alike; its capacity is read from
// /slots before its first decode, while its /metrics prints -nan.
func TestRealLlamaServerAnswersThroughTheGatewayAsDirectly(t *testing.T) {
	l := realLlamaServer(t)
	startGateway(t, l.engine(t, "llama", "tiny", ""))

	resp, body := post(t, "/v1/chat/completions", llamaChat("tiny", "warm up", false))
	if resp.StatusCode != 200 {
		t.Fatalf("the first request, which starts llama-server: %d %s\n%s", resp.StatusCode, body, strings.Join(status(t, "llama").LastLines, "\n"))
	}
	port := status(t, "llama").Port
	for _, stream := range []bool{false, true} {
		for i, msg := range []string{"hello there", "what is a gateway"} {
			body := llamaChat("tiny", msg, stream)
			gw, gwBody := post(t, "/v1/chat/completions", body)
			dr, drBody := direct(t, port, body)
			if gw.StatusCode != 200 || dr.StatusCode != 200 {
				t.Fatalf("gateway %d, direct %d", gw.StatusCode, dr.StatusCode)
			}
			got, want := answerOf, answerOf
			if stream {
				got, want = streamOf, streamOf
			}
			if g, w := got(t, gwBody), want(t, drBody); g != w {
				t.Fatalf("stream %t, prompt %d: the gateway answered %s, the engine directly %s", stream, i, g, w)
			}
		}
	}
	eventually(t, "the gateway reads llama-server's two slots", func() bool {
		return sample(t, scrape(t), "llm_gateway_engine_capacity", `engine="llama"`) == 2
	})
}

// Before its first decode a llama-server's /metrics may print -nan; the
// gateway still knows its capacity from /slots, and after the decode its
// load from /metrics.
func TestRealLlamaServerSignalsBeforeAndAfterItsFirstDecode(t *testing.T) {
	l := realLlamaServer(t)
	startGateway(t, l.engine(t, "llama", "tiny", ""))
	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/llama/start"))
	if resp.StatusCode != 200 {
		t.Fatalf("admin start: %d %s", resp.StatusCode, body)
	}
	port := status(t, "llama").Port
	_, metrics := do(t, mustReq(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics"))
	t.Logf("llama-server's /metrics before its first decode has -nan: %t", strings.Contains(metrics, "nan"))
	eventually(t, "capacity from /slots before the first decode", func() bool {
		return sample(t, scrape(t), "llm_gateway_engine_capacity", `engine="llama"`) == 2
	})
	if resp, body := post(t, "/v1/chat/completions", llamaChat("tiny", "hi", false)); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := engineMetric(t, port, "llamacpp:prompt_tokens_total"); n <= 0 {
		t.Fatalf("llama-server counted %v prompt tokens after a decode", n)
	}
	if sample(t, scrape(t), "llm_gateway_engine_capacity", `engine="llama"`) != 2 {
		t.Fatal("capacity lost after the first decode")
	}
}

// A session's slot is saved before an admin stop and restored for its next
// turn: llama-server's own count of processed prompt tokens shows the next
// turn processing its new part only.
func TestRealLlamaServerSlotSurvivesAnAdminStop(t *testing.T) {
	l := realLlamaServer(t)
	startGateway(t, l.engine(t, "llama", "tiny", "slots save "+caddyQuote(l.slots)+" {\n\t\t\t\tparallel 2\n\t\t\t}"))
	doc := strings.Repeat("the gateway keeps a conversation in its slot. ", 10)
	turn := func(msgs string) (int, string) {
		t.Helper()
		body := `{"model":"tiny","max_tokens":4,"temperature":0,"cache_prompt":true,"messages":[` + msgs + `]}`
		resp, answer := post(t, "/v1/chat/completions", body, "X-Session-Id", "alice")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s\n%s", resp.StatusCode, answer, strings.Join(status(t, "llama").LastLines, "\n"))
		}
		port := status(t, "llama").Port
		var a struct {
			Choices []struct{ Message struct{ Content string } }
		}
		_ = json.Unmarshal([]byte(answer), &a)
		return int(engineMetric(t, port, "llamacpp:prompt_tokens_total")), a.Choices[0].Message.Content
	}
	first := fmt.Sprintf(`{"role":"user","content":%q}`, doc+"what does it keep?")
	processed1, reply := turn(first)
	do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/llama/stop"))
	awaitState(t, "llama", "stopped")
	files, _ := filepath.Glob(filepath.Join(l.slots, "*.bin"))
	if len(files) != 1 {
		t.Fatalf("slot files after the stop: %v, slots %+v", files, status(t, "llama").Slots)
	}
	// the garbage reply may hold control bytes: JSON's escapes, not Go's
	quoted, _ := json.Marshal(reply)
	processed2, _ := turn(first + `,{"role":"assistant","content":` + string(quoted) + `},{"role":"user","content":"and then?"}`)
	s := status(t, "llama").Slots
	t.Logf("prompt tokens processed: %d on the first turn, %d on the next after the stop; slots %+v", processed1, processed2, s)
	if s == nil || s.Restores != 1 || processed2*3 > processed1 {
		t.Fatalf("the next turn processed %d of the first's %d prompt tokens; slots %+v", processed2, processed1, s)
	}
}

// A session's slot is saved when a budget swap stops its engine for
// another, and restored when the session's next turn swaps it back.
func TestRealLlamaServerSlotSurvivesABudgetSwap(t *testing.T) {
	l := realLlamaServer(t)
	slots := "slots save " + caddyQuote(l.slots) + " {\n\t\t\t\tparallel 2\n\t\t\t}\n\t\t\tmemory 1GiB"
	startGateway(t, "memory_budget 1GiB"+l.engine(t, "llama", "tiny", slots)+l.engine(t, "other", "tiny-other", "memory 1GiB"))
	doc := strings.Repeat("a swap keeps the conversation in a file. ", 10)
	first := fmt.Sprintf(`{"role":"user","content":%q}`, doc+"what does it keep?")
	ask := func(model, msgs string) string {
		t.Helper()
		body := `{"model":"` + model + `","max_tokens":4,"temperature":0,"cache_prompt":true,"messages":[` + msgs + `]}`
		resp, answer := post(t, "/v1/chat/completions", body, "X-Session-Id", "bob")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, answer)
		}
		var a struct {
			Choices []struct{ Message struct{ Content string } }
		}
		_ = json.Unmarshal([]byte(answer), &a)
		return a.Choices[0].Message.Content
	}
	reply := ask("tiny", first)
	processed1 := int(engineMetric(t, status(t, "llama").Port, "llamacpp:prompt_tokens_total"))
	ask("tiny-other", `{"role":"user","content":"hi"}`) // swaps llama out
	if s := status(t, "llama"); s.State != "stopped" || s.Slots == nil || s.Slots.Saves != 1 {
		t.Fatalf("llama after the swap: %s, slots %+v", s.State, s.Slots)
	}
	quoted, _ := json.Marshal(reply)
	ask("tiny", first+`,{"role":"assistant","content":`+string(quoted)+`},{"role":"user","content":"and then?"}`) // swaps it back
	processed2 := int(engineMetric(t, status(t, "llama").Port, "llamacpp:prompt_tokens_total"))
	s := status(t, "llama").Slots
	t.Logf("prompt tokens processed: %d on the first turn, %d on the next after the swap; slots %+v", processed1, processed2, s)
	if s.Restores != 1 || processed2*3 > processed1 {
		t.Fatalf("the next turn processed %d of the first's %d prompt tokens; slots %+v", processed2, processed1, s)
	}
}

// Conversations one after another over a pool of two llama-servers spread
// over both, and each one's next turn stays on its member.
func TestRealLlamaServerPoolSpreadsConversationsInSequence(t *testing.T) {
	l := realLlamaServer(t)
	startGateway(t, l.engine(t, "llama0", "tiny-0", "")+l.engine(t, "llama1", "tiny-1", "")+`
		pool tiny {
			member llama0
			member llama1
		}`)
	for _, name := range []string{"llama0", "llama1"} {
		if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/"+name+"/start")); resp.StatusCode != 200 {
			t.Fatalf("admin start of %s: %d %s", name, resp.StatusCode, body)
		}
	}
	served := map[string]int{}
	for c := range 4 {
		opening := fmt.Sprintf(`{"role":"user","content":%q}`, fmt.Sprintf("conversation %d: ", c)+strings.Repeat(fmt.Sprintf("topic %d, ", c), 60))
		resp, body := post(t, "/v1/chat/completions", `{"model":"tiny","max_tokens":4,"temperature":0,"messages":[`+opening+`]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		by := resp.Header.Get("X-LLM-Engine")
		served[by]++
		next := opening + `,{"role":"assistant","content":"ok"},{"role":"user","content":"go on"}`
		resp, body = post(t, "/v1/chat/completions", `{"model":"tiny","max_tokens":4,"temperature":0,"messages":[`+next+`]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if again := resp.Header.Get("X-LLM-Engine"); again != by {
			t.Fatalf("conversation %d moved from %s to %s on its next turn", c, by, again)
		}
	}
	if served["llama0"] == 0 || served["llama1"] == 0 {
		t.Fatalf("4 conversations in sequence began on %v", served)
	}
}

// A llama-server killed mid-stream: the stream goes on from its fallback,
// another llama-server, as one stream (a seam comment, then the rest, then
// [DONE]), never as an error. That llama-server's template closes a
// trailing assistant message, so the continuation is a new answer, not the
// cut one's rest: the test checks the stream's shape, never its text.
func TestRealLlamaServerKilledMidStreamIsResumedOnItsFallback(t *testing.T) {
	l := realLlamaServer(t)
	startGateway(t, l.engine(t, "llama", "tiny", "resume on\n\t\t\tfallback spare")+l.engine(t, "spare", "tiny-spare", "prefill on"))
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/spare/start")); resp.StatusCode != 200 {
		t.Fatalf("admin start of the fallback: %d %s", resp.StatusCode, body)
	}
	req, err := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions", strings.NewReader(
		`{"model":"tiny","max_tokens":200,"temperature":0,"stream":true,"messages":[{"role":"user","content":"tell me a story"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var seen strings.Builder
	for !strings.Contains(seen.String(), `"content":`) {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its first content: %v\n%s", err, seen.String())
		}
		seen.WriteString(line)
	}
	pid := status(t, "llama").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing llama-server %d: %v", pid, err)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream after the kill: %v", err)
	}
	all := seen.String() + string(rest)
	if !strings.Contains(all, ": resumed on spare") || !strings.HasSuffix(strings.TrimSpace(all), "data: [DONE]") || strings.Contains(all, `"error"`) {
		t.Fatalf("not one whole stream after the kill:\n%s", all)
	}
}
