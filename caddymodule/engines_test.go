package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// status asks the admin API for one engine.
func status(t *testing.T, name string) engines.Status {
	t.Helper()
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/engines/"+name))
	if resp.StatusCode != 200 {
		t.Fatalf("admin status of %s: %d %s", name, resp.StatusCode, body)
	}
	var s engines.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// awaitState polls the admin API until the engine is in state.
func awaitState(t *testing.T, name, state string) engines.Status {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := status(t, name)
		if s.State == state {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %s stayed %s, want %s", name, s.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether a process with that pid exists (and is no zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// the state is the field after the parenthesised command name
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// startsFile names a file each engine start appends its pid to.
func startsFile(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "starts")
	t.Setenv("LLMGW_TEST_STARTS", f)
	return f
}

func countStarts(t *testing.T, f string) int {
	b, err := os.ReadFile(f)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(string(b)))
}

func TestColdEngineStartsOnceForAThousandConcurrentRequests(t *testing.T) {
	starts := startsFile(t)
	startGateway(t, `
		engine cold {
			`+engineCmd("--load-time 300ms --chunk-delay 0s")+`
			models cold
		}`)
	const n = 1000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(gwURL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"cold","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	bad := map[int]int{}
	for c := range codes {
		if c != 200 {
			bad[c]++
		}
	}
	if len(bad) > 0 {
		t.Fatalf("non-200 answers: %v", bad)
	}
	if got := countStarts(t, starts); got != 1 {
		t.Fatalf("%d engine processes started for %d concurrent cold requests, want 1", got, n)
	}
}

// The caller hears why and where to look, never the engine's output (engines
// print their keys); the output is in the admin API.
func TestFailedStartAnswers503WithReasonAndWhereToLookThenRetries(t *testing.T) {
	starts := startsFile(t)
	startGateway(t, `
		engine broken {
			`+engineCmd("--load-time 100ms --exit-during-load")+`
			models broken
		}
		engine missing {
			cmd /nonexistent/llama-server --port {engine.port}
			to http://127.0.0.1:{engine.port}
			models missing
		}`)
	resp, body := post(t, "/v1/chat/completions", `{"model":"broken"}`)
	if resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"engine broken failed to start", "exited with status 3", "/llm_gateway/engines/broken"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the 503 does not say %q: %s", want, body)
		}
	}
	if strings.Contains(body, "failed to load model (simulated)") {
		t.Fatalf("the engine's output reached the caller: %s", body)
	}
	if s := status(t, "broken"); !strings.Contains(s.LastError, "failed to load model (simulated)") {
		t.Fatalf("the admin API lacks the engine's output: %+v", s)
	}
	// no wedged failed state: the next request tries a fresh start
	resp, _ = post(t, "/v1/chat/completions", `{"model":"broken"}`)
	if resp.StatusCode != 503 || countStarts(t, starts) != 2 {
		t.Fatalf("second request: %d, %d starts", resp.StatusCode, countStarts(t, starts))
	}

	resp, body = post(t, "/v1/chat/completions", `{"model":"missing"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "engine missing failed to start") || !strings.Contains(body, "no such file") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestIdleEngineStopsAndTheNextRequestStartsItAgain(t *testing.T) {
	startGateway(t, `
		engine idler {
			`+engineCmd("")+`
			models idler
			idle_timeout 300ms
		}`)
	mustAnswer(t, "idler")
	first := status(t, "idler").PID
	awaitState(t, "idler", "stopped")
	if alive(first) {
		t.Fatalf("idle engine's process %d still runs", first)
	}
	mustAnswer(t, "idler")
	if second := status(t, "idler").PID; second == first || second == 0 {
		t.Fatalf("pid after restart %d, before %d", second, first)
	}
}

func TestLeaseKeepsEngineUpPastIdleTimeout(t *testing.T) {
	startGateway(t, `
		engine slow {
			`+engineCmd("--words-per-chunk 1 --chunk-delay 40ms")+`
			models slow
			idle_timeout 100ms
		}`)
	// a ~1 s stream on an engine with a 100 ms idle timeout
	text, err := readStream(sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("slow", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(text, "as a real model server would.") {
		t.Fatalf("stream cut short: %q", text)
	}
	awaitState(t, "slow", "stopped")
}

func TestRequestsArrivingAtTheIdleBoundaryNeverFail(t *testing.T) {
	startGateway(t, `
		engine edge {
			`+engineCmd("--chunk-delay 0s")+`
			models edge
			idle_timeout 15ms
		}`)
	// requests spaced around the idle timeout: each one either keeps the
	// engine or waits for its stop and starts it again; none may fail
	for i := range 60 {
		resp, body := post(t, "/v1/chat/completions", `{"model":"edge"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		time.Sleep(time.Duration(i%7) * 4 * time.Millisecond) // spread around the 15 ms boundary
	}
}

func TestGroupSwapWaitsForLeasesAndNeverRunsBothEngines(t *testing.T) {
	startGateway(t, `
		engine a {
			`+engineCmd("--model a --words-per-chunk 1 --chunk-delay 20ms")+`
			models a
			group gpu0
		}
		engine b {
			`+engineCmd("--model b --chunk-delay 0s")+`
			models b
			group gpu0
		}`)
	mustAnswer(t, "a")
	pidA := status(t, "a").PID

	// a long stream on a is in flight when b is asked for
	streamDone := make(chan string)
	streamStarted := make(chan struct{})
	go func() {
		stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("a", "long"))
		if stream.Next() {
			close(streamStarted)
		}
		text, err := readStream(stream)
		if err != nil {
			text += " ERROR " + err.Error()
		}
		streamDone <- text
	}()
	<-streamStarted
	resp, body := post(t, "/v1/chat/completions", `{"model":"b"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "model b") {
		t.Fatalf("b: %d %s", resp.StatusCode, body)
	}
	select {
	case text := <-streamDone:
		if !strings.HasSuffix(text, "as a real model server would.") {
			t.Fatalf("the stream on a was cut by the swap: %q", text)
		}
	default:
		t.Fatal("b answered before a's in-flight stream had finished")
	}
	if alive(pidA) {
		t.Fatalf("a (pid %d) still runs next to b", pidA)
	}
	if s := status(t, "a"); s.State != "stopped" {
		t.Fatalf("a is %s", s.State)
	}
	// and back: a request for a swaps b out
	mustAnswer(t, "a")
	if s := status(t, "b"); s.State != "stopped" {
		t.Fatalf("b is %s after a came back", s.State)
	}
}

func TestReloadKeepsAnUnchangedEngineAndReplacesAChangedOne(t *testing.T) {
	site := func(extra, flags string) string {
		return `
		engine keep {
			` + engineCmd("--model keep") + `
			models keep
		}
		engine change {
			` + engineCmd(flags) + `
			models change
		}` + extra
	}
	startGateway(t, site("", "--model v1"))
	for _, m := range []string{"keep", "change"} {
		if resp, body := post(t, "/v1/chat/completions", `{"model":"`+m+`"}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	keepPID, changePID := status(t, "keep").PID, status(t, "change").PID

	startGateway(t, site("", "--model v2"))
	if got := status(t, "keep"); got.PID != keepPID || got.State != "ready" {
		t.Fatalf("reload replaced an unchanged engine: pid %d → %d (%s)", keepPID, got.PID, got.State)
	}
	if alive(changePID) {
		t.Fatalf("the changed engine's old process %d still runs", changePID)
	}
	resp, body := post(t, "/v1/chat/completions", `{"model":"change"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "model v2") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	// a config without the gateway is what Caddy's stop does to it: every
	// engine it started is stopped, no child is left
	keepPID, changePID = status(t, "keep").PID, status(t, "change").PID
	initRaw(t, `{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
}
http://`+gwAddr+` {
	respond "no gateway"
}`)
	for _, pid := range []int{keepPID, changePID} {
		if alive(pid) {
			t.Fatalf("engine process %d outlived the config that started it", pid)
		}
	}
	// and no goroutine of an engine or of the handler is left behind
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "caddy-llm-gateway/engines.") || strings.Contains(g, "caddy-llm-gateway/handler.") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the gateway's config went away:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWakeOffRefusesWithTheAdminCallAndAdminStartsAndStops(t *testing.T) {
	startGateway(t, `
		wake off
		engine sleeper {
			`+engineCmd("")+`
			models sleeper
		}`)
	resp, body := post(t, "/v1/chat/completions", `{"model":"sleeper"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "engine sleeper is not running") ||
		!strings.Contains(body, "POST /llm_gateway/engines/sleeper/start") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	page, err := sdk("").Models.List(context.Background())
	if err != nil || len(page.Data) != 0 {
		t.Fatalf("with wake off a stopped engine is not listed: %v %+v", err, page)
	}

	resp, body = do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/sleeper/start"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"state": "ready"`) {
		t.Fatalf("admin start: %d %s", resp.StatusCode, body)
	}
	mustAnswer(t, "sleeper")
	page, err = sdk("").Models.List(context.Background())
	if err != nil || len(page.Data) != 1 || !strings.Contains(page.Data[0].RawJSON(), `"loaded"`) {
		t.Fatalf("running engine listed as loaded: %v %+v", err, page.Data)
	}
	s := status(t, "sleeper")
	if len(s.LastLines) == 0 || !strings.Contains(strings.Join(s.LastLines, "\n"), "listening on") {
		t.Fatalf("admin status lacks the engine's output: %+v", s)
	}

	resp, body = do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/sleeper/stop?drain=true"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"state": "stopped"`) || alive(s.PID) {
		t.Fatalf("admin stop: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/engines"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"name": "sleeper"`) {
		t.Fatalf("admin list: %d %s", resp.StatusCode, body)
	}
}

func TestEngineCrashMidStreamIsAnErrorAndTheEngineComesBack(t *testing.T) {
	starts := startsFile(t)
	startGateway(t, `
		engine crashy {
			`+engineCmd("--exit-after-chunks 2 --chunk-delay 1ms")+`
			models crashy
		}`)
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("crashy", "hi"))
	n := 0
	for stream.Next() {
		n++
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "crashy") {
		t.Fatalf("a stream cut by a crash after %d events ended without an error naming the engine: %v", n, err)
	}
	awaitState(t, "crashy", "stopped")
	// the next request starts it again (this one is not streamed, so it
	// completes before the engine's crash-after-chunks trips)
	resp, body := post(t, "/v1/chat/completions", `{"model":"crashy"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := countStarts(t, starts); got != 2 {
		t.Fatalf("%d starts, want 2", got)
	}
}

func TestEngineWithSIGTERMIgnoredIsKilledAfterStopTimeout(t *testing.T) {
	startGateway(t, `
		engine stubborn {
			`+engineCmd("--ignore-sigterm")+`
			models stubborn
			stop_timeout 200ms
		}`)
	mustAnswer(t, "stubborn")
	pid := status(t, "stubborn").PID
	start := time.Now()
	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/stubborn/stop"))
	if resp.StatusCode != 200 || alive(pid) {
		t.Fatalf("stop: %d %s, alive %v", resp.StatusCode, body, alive(pid))
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("stop took %s with stop_timeout 200ms", took)
	}
}

func TestSlowLoadingEngineIsServedOnceReady(t *testing.T) {
	startGateway(t, `
		engine loader {
			`+engineCmd("--load-time 400ms")+`
			models loader
			start_timeout 10s
		}`)
	start := time.Now()
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("loader", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("served after %s, before the engine finished loading", took)
	}
}

// A stop with ?drain=true, an engine's or every engine's, answers once the
// requests in flight have finished, whole.
func TestAdminStopWithDrainWaitsForTheRequestsInFlight(t *testing.T) {
	for _, path := range []string{"/llm_gateway/engines/drained/stop?drain=true", "/llm_gateway/engines/stop?drain=true"} {
		t.Run(path, func(t *testing.T) {
			startGateway(t, `
		engine drained {
			`+engineCmd("--words-per-chunk 1 --chunk-delay 20ms")+`
			models drained
		}`)
			stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("drained", "hi"))
			if !stream.Next() {
				t.Fatal(stream.Err())
			}
			type answer struct {
				at   time.Time
				body string
			}
			stopped := make(chan answer, 1)
			go func() {
				_, body := do(t, mustReq(http.MethodPost, adminURL+path))
				stopped <- answer{time.Now(), body}
			}()
			text, err := readStream(stream)
			streamEnded := time.Now()
			if err != nil || !strings.HasSuffix(text, "as a real model server would.") {
				t.Fatalf("the drained stream was cut: %q %v", text, err)
			}
			a := <-stopped
			if a.at.Before(streamEnded.Add(-50 * time.Millisecond)) {
				t.Fatalf("stop returned %s before the stream in flight ended", streamEnded.Sub(a.at))
			}
			if strings.Contains(path, "/engines/stop") && !strings.Contains(a.body, `"drained"`) {
				t.Fatalf("the stop of every engine answered %s", a.body)
			}
			if s := status(t, "drained"); s.State != "stopped" {
				t.Fatalf("state %s after the drained stop", s.State)
			}
		})
	}
}

// POST /llm_gateway/engines/stop (llama-swap's /unload) stops every engine
// the gateway runs, each as its own stop would, and leaves alone an engine
// it does not run; a GET is refused as each engine's stop refuses it, and
// the next request starts a stopped engine again.
func TestAdminStopAllStopsEveryEngineTheGatewayRuns(t *testing.T) {
	up := httptest.NewServer(&laxengine.Engine{})
	t.Cleanup(up.Close)
	startGateway(t, `
		engine one {
			`+engineCmd("")+`
			models one
		}
		engine two {
			`+engineCmd("")+`
			models two
		}
		engine idle {
			`+engineCmd("")+`
			models idle
		}
		engine remote {
			to `+up.URL+`
			models remote
		}`)
	mustAnswer(t, "one")
	mustAnswer(t, "two")
	mustAnswer(t, "remote")
	one, two, remote := status(t, "one"), status(t, "two"), status(t, "remote")

	for _, path := range []string{"/llm_gateway/engines/stop", "/llm_gateway/engines/one/stop"} {
		if resp, body := do(t, mustReq(http.MethodGet, adminURL+path)); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	// a page of another site may not stop them either: Caddy's origin check
	for _, path := range []string{"/llm_gateway/engines/stop", "/llm_gateway/engines/one/stop"} {
		req := mustReq(http.MethodPost, adminURL+path)
		req.Header.Set("Origin", "http://elsewhere.example")
		if resp, body := do(t, req); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST %s from another origin: %d %s", path, resp.StatusCode, body)
		}
	}
	if s := status(t, "one"); s.State != "ready" || !alive(one.PID) {
		t.Fatalf("one is %s after a GET and a cross-origin POST of the stop", s.State)
	}

	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/stop"))
	var got struct {
		Stopped []string          `json:"stopped"`
		Failed  map[string]string `json:"failed"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stop all: %d %s %v", resp.StatusCode, body, err)
	}
	// idle never started: there was nothing of it to stop
	if strings.Join(got.Stopped, ",") != "one,two" || len(got.Failed) != 0 {
		t.Fatalf("stop all answered %s, want one and two stopped", body)
	}
	for _, s := range []engines.Status{one, two} {
		if alive(s.PID) {
			t.Fatalf("%s's process %d outlived the stop of every engine", s.Name, s.PID)
		}
		if now := status(t, s.Name); now.State != "stopped" {
			t.Fatalf("%s is %s after the stop of every engine", s.Name, now.State)
		}
	}
	if now := status(t, "remote"); now.State != remote.State {
		t.Fatalf("remote went from %s to %s", remote.State, now.State)
	}
	mustAnswer(t, "remote")

	mustAnswer(t, "one")
	if s := status(t, "one"); s.State != "ready" || s.PID == one.PID || !alive(s.PID) {
		t.Fatalf("one after a request: %s, pid %d (was %d)", s.State, s.PID, one.PID)
	}
}

// A reload that removes an engine with a stream in flight returns at once;
// the engine drains in the background and the stream ends whole.
func TestReloadReturnsAtOnceWhileARemovedEngineDrains(t *testing.T) {
	startGateway(t, `
		engine leaving {
			`+engineCmd("--words-per-chunk 1 --chunk-delay 300ms")+`
			models leaving
			stop_timeout 60s
		}`)
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("leaving", "hi"))
	if !stream.Next() {
		t.Fatal(stream.Err())
	}
	// the stream has some 25 more chunks, 300 ms apart: about 8 s
	start := time.Now()
	startGateway(t, `
		engine other {
			to http://127.0.0.1:1
			models other
		}`)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("the reload took %s: it waited for the removed engine's stream", took)
	}
	text, err := readStream(stream)
	if err != nil || !strings.HasSuffix(text, "as a real model server would.") {
		t.Fatalf("the draining engine's stream was cut: %q %v", text, err)
	}
	draining.Wait() // the engine is stopped once its stream ended
}

// An engine's log (its life and its output) is under the module's logger,
// so a log that includes http.handlers.llm_gateway gets it.
// loggedRuns numbers the runs of TestEngineLogsAreUnderTheModulesLoggerName:
// an engine whose definition a new config keeps is kept running, so a run
// after the first (-count 2) must start an engine of its own to see its
// start in its own log.
var loggedRuns atomic.Int64

func TestEngineLogsAreUnderTheModulesLoggerName(t *testing.T) {
	moduleLog := filepath.Join(t.TempDir(), "module.log")
	name := "logged" + strconv.FormatInt(loggedRuns.Add(1), 10)
	initRaw(t, `{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	https_port @HTTPS@
	grace_period 1ns
	log llm {
		output file `+moduleLog+`
		include http.handlers.llm_gateway
	}
}
http://`+gwAddr+` {
	llm_gateway {
		engine `+name+` {
			`+engineCmd("--model "+name)+`
			models `+name+`
		}
	}
}
`)
	mustAnswer(t, name)
	// the engine's own lines are read from its output on their own
	// goroutine: the request can be answered before the listening line
	// is logged, so the test waits for the lines, not for the answer
	wants := []string{`"logger":"http.handlers.llm_gateway.engine.` + name + `"`, `"msg":"engine ready"`, "demo engine: model " + name + " listening"}
	var logs string
	eventually(t, "the engine's lines in the module's log", func() bool {
		logs = readFile(t, moduleLog)
		for _, want := range wants {
			if !strings.Contains(logs, want) {
				return false
			}
		}
		return true
	})
}

func TestAdminPoolsIsAnEmptyListWithoutPools(t *testing.T) {
	startGateway(t, `
		engine nopools {
			to http://127.0.0.1:9
			models nopools
		}`)
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools"))
	if resp.StatusCode != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("%d %q, want 200 []", resp.StatusCode, body)
	}
}
