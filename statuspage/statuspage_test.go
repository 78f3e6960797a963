package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

func TestRingKeepsTheNewestInOrderAndALateReaderSkipsAhead(t *testing.T) {
	r := newRing[int](4)
	items, missed, last, wake := r.since(0)
	if len(items) != 0 || missed != 0 || last != 0 {
		t.Fatalf("empty ring: %v %d %d", items, missed, last)
	}
	for i := 1; i <= 3; i++ {
		r.add(i)
	}
	select {
	case <-wake:
	default:
		t.Fatal("an add did not wake the reader")
	}
	items, missed, last, _ = r.since(1)
	if fmt.Sprint(items) != "[2 3]" || missed != 0 || last != 3 {
		t.Fatalf("since 1: %v missed %d last %d", items, missed, last)
	}
	for i := 4; i <= 10; i++ {
		r.add(i)
	}
	items, missed, last, _ = r.since(3)
	if fmt.Sprint(items) != "[7 8 9 10]" || missed != 3 || last != 10 {
		t.Fatalf("since 3: %v missed %d last %d", items, missed, last)
	}
	r.resize(2)
	if items, _, _, _ = r.since(0); fmt.Sprint(items) != "[9 10]" {
		t.Fatalf("after shrinking: %v", items)
	}
	r.resize(5)
	r.add(11)
	if items, _, _, _ = r.since(0); fmt.Sprint(items) != "[9 10 11]" {
		t.Fatalf("after growing: %v", items)
	}
}

func TestBoardNumbersRequestsAndBoundsWhatItKeeps(t *testing.T) {
	b := NewBoard(3)
	for i := range 5 {
		b.Record(Request{Model: fmt.Sprint(i), Status: 200})
	}
	reqs, missed, last, _ := b.Requests(0)
	if len(reqs) != 3 || missed != 2 || last != 5 || reqs[0].Seq != 3 || reqs[0].Model != "2" || reqs[2].Seq != 5 {
		t.Fatalf("%+v missed %d last %d", reqs, missed, last)
	}
	b.Record(Request{Model: strings.Repeat("m", 10*maxModelLen)})
	reqs, _, _, _ = b.Requests(last)
	if len(reqs) != 1 || len(reqs[0].Model) > maxModelLen+len("…") {
		t.Fatalf("a long model name is kept whole: %d bytes", len(reqs[0].Model))
	}
}

// fakeSource is a gateway of given engines and keys.
type fakeSource struct {
	mu   sync.Mutex
	es   []*engines.Engine
	keys []quota.KeyUsage
	acts []string
}

func (f *fakeSource) Engines() []*engines.Engine  { return f.es }
func (f *fakeSource) Pools() []handler.PoolStatus { return nil }
func (f *fakeSource) Act(ctx context.Context, name, action string, drain bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf("%s %s %v", action, name, drain))
	return nil
}

// KeyUsage is a copy, as the gateway's is: ResetKey changes f.keys.
func (f *fakeSource) KeyUsage() []quota.KeyUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]quota.KeyUsage, 0, len(f.keys))
	for _, u := range f.keys {
		out = append(out, quota.KeyUsage{Key: u.Key, Limits: append([]quota.LimitUsage(nil), u.Limits...)})
	}
	return out
}

// ResetKey zeroes a known key's counters, as the gateway does; an unknown
// key is the admin API's 404.
func (f *fakeSource) ResetKey(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, "reset "+name)
	for _, u := range f.keys {
		if u.Key == name {
			for i := range u.Limits {
				u.Limits[i].Used, u.Limits[i].Remaining = 0, u.Limits[i].Limit.N
			}
			return nil
		}
	}
	return notFound{name}
}

type notFound struct{ key string }

func (e notFound) Error() string {
	return fmt.Sprintf("no key named %q has limits in the running config", e.key)
}
func (e notFound) StatusCode() int { return http.StatusNotFound }

// teamUsage is a key "team-a" with a rate limit and a token budget, part
// used, the budget's window ending at reset.
func teamUsage(t *testing.T, reset time.Time) []quota.KeyUsage {
	t.Helper()
	limit := func(spec string) quota.Limit {
		l, err := quota.ParseLimit(spec)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	return []quota.KeyUsage{{Key: "team-a", Limits: []quota.LimitUsage{
		{Kind: quota.Requests, Limit: limit("60/m"), Used: 12, Remaining: 48, Reset: reset.Truncate(time.Minute)},
		{Kind: quota.Tokens, Limit: limit("200k/d"), Used: 1500, Reserved: 300, Remaining: 198200, Reset: reset},
	}}}
}

func remoteEngine(t *testing.T, name string) *engines.Engine {
	t.Helper()
	e, err := engines.New(engines.Config{Name: name, To: "http://127.0.0.1:9", Models: []string{name + "-model"}}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Destruct() })
	return e
}

// talkativeEngine is a managed engine whose start fails after it printed
// lines, some of them holding its key.
func talkativeEngine(t *testing.T) *engines.Engine {
	t.Helper()
	e, err := engines.New(engines.Config{
		Name: "talky", To: "http://127.0.0.1:{engine.port}", Models: []string{"talky"},
		APIKey: "engine-key-abcdef",
		Cmd:    []string{"sh", "-c", "echo first line; echo using engine-key-abcdef; echo 'Authorization: Bearer callers-token-123'; echo last line; exit 3"},
	}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Destruct() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Start(ctx); err == nil {
		t.Fatal("the engine's start should fail: it exits")
	}
	return e
}

func newTestServer(t *testing.T, src Source, keys *Keys) (*httptest.Server, *Board) {
	t.Helper()
	board := NewBoard(50)
	s := &Server{Prefix: "/llm", Keys: keys, Board: board, Source: src}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, board
}

type event struct {
	name string
	data string
}

// readEvents reads server-sent events from body into a channel until it ends.
func readEvents(body io.Reader) <-chan event {
	ch := make(chan event, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.name != "":
				ch <- ev
				ev = event{}
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan event, name string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before a %q event", name)
			}
			if ev.name == name {
				return ev.data
			}
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

func get(t *testing.T, ts *httptest.Server, path, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestWithoutAKeyTheAPIShowsNothing(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "secret-engine-name")}, keys: teamUsage(t, time.Now())}
	ts, board := newTestServer(t, src, NewKeys([]string{"right-key"}))
	board.Record(Request{Model: "secret-engine-name-model", Status: 200})
	for _, key := range []string{"", "wrong-key"} {
		for _, path := range []string{"/llm/api/state", "/llm/api/events", "/llm/api/logs/secret-engine-name"} {
			resp := get(t, ts, path, key)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "secret-engine") {
				t.Errorf("GET %s with key %q: %d %s", path, key, resp.StatusCode, body)
			}
		}
		for _, path := range []string{"/llm/api/engines/secret-engine-name/stop", "/llm/api/keys/team-a/reset"} {
			req, _ := http.NewRequest(http.MethodPost, ts.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST %s with key %q: %d", path, key, resp.StatusCode)
			}
		}
	}
	if len(src.acts) != 0 {
		t.Fatalf("actions ran without a key: %v", src.acts)
	}
	// the page itself holds no data, so it is served to anyone
	resp := get(t, ts, "/llm/", "")
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Contains(string(page), "secret-engine") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("page: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	if resp := get(t, ts, "/llm/api/state", "right-key"); resp.StatusCode != 200 {
		t.Fatalf("with the right key: %d", resp.StatusCode)
	}
}

func TestEventsSendStateThenRequestsInOrderAndNeverAKey(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}, keys: teamUsage(t, time.Now().Add(time.Hour))}
	ts, board := newTestServer(t, src, NewKeys([]string{"the-callers-token"}))
	board.Record(Request{Model: "m1", Engine: "cloud", Status: 200, KeyName: "team-a", TokensIn: 3, TokensOut: 5})
	board.Record(Request{Model: "m2", Engine: "cloud", Status: 502, KeyName: "team-a"})
	resp := get(t, ts, "/llm/api/events", "the-callers-token")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readEvents(resp.Body)
	var snap snapshot
	state := next(t, events, "state")
	if err := json.Unmarshal([]byte(state), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Engines) != 1 || snap.Engines[0].Name != "cloud" || snap.Engines[0].Managed {
		t.Fatalf("state: %+v", snap)
	}
	if len(snap.Keys) != 1 || snap.Keys[0].Name != "team-a" || len(snap.Keys[0].Limits) != 2 {
		t.Fatalf("keys in the state: %s", state)
	}
	type batch struct {
		Requests []Request `json:"requests"`
		Reset    bool      `json:"reset"`
		Keep     int       `json:"keep"`
	}
	var first batch
	raw := next(t, events, "requests")
	if err := json.Unmarshal([]byte(raw), &first); err != nil {
		t.Fatal(err)
	}
	if !first.Reset || first.Keep != 50 || len(first.Requests) != 2 || first.Requests[0].Model != "m1" || first.Requests[1].Seq != 2 {
		t.Fatalf("first batch: %s", raw)
	}
	seen := raw
	for i := 3; i <= 30; i++ {
		board.Record(Request{Model: fmt.Sprintf("m%d", i), Status: 200, KeyName: "team-a"})
	}
	want := uint64(3)
	for want <= 30 {
		raw := next(t, events, "requests")
		seen += raw
		var b batch
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			t.Fatal(err)
		}
		for _, q := range b.Requests {
			if q.Seq != want || q.Model != fmt.Sprintf("m%d", want) {
				t.Fatalf("got request %d (%s), want %d: out of order", q.Seq, q.Model, want)
			}
			want++
		}
	}
	seen += state
	if strings.Contains(seen, "the-callers-token") || !strings.Contains(seen, `"key":"team-a"`) {
		t.Fatalf("the stream shows the key, or not its name: %s", seen)
	}
}

func TestAStuckPageNeverHoldsTheGatewayUp(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}}
	ts, board := newTestServer(t, src, nil)
	// a page that opens the stream and never reads it
	resp := get(t, ts, "/llm/api/events", "")
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200_000 {
			board.Record(Request{Model: fmt.Sprint(i), Status: 200})
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("recording requests waits for a page that does not read")
	}
	if n := board.requests.size(); n != 50 {
		t.Fatalf("the board holds %d requests, want its bound 50", n)
	}
	// the stuck page reads at last: the newest requests, never more than kept
	events := readEvents(resp.Body)
	deadline := time.After(30 * time.Second)
	for {
		var b struct {
			Requests []Request `json:"requests"`
		}
		_ = json.Unmarshal([]byte(next(t, events, "requests")), &b)
		if len(b.Requests) > 50 {
			t.Fatalf("a batch of %d requests, more than kept", len(b.Requests))
		}
		if len(b.Requests) > 0 && b.Requests[len(b.Requests)-1].Seq == 200_000 {
			return
		}
		select {
		case <-deadline:
			t.Fatal("the page never caught up with the newest request")
		default:
		}
	}
}

func TestLogsStreamTheKeptLinesMaskedThenNewOnes(t *testing.T) {
	e := talkativeEngine(t)
	ts, _ := newTestServer(t, &fakeSource{es: []*engines.Engine{e}}, nil)
	resp := get(t, ts, "/llm/api/logs/talky", "")
	events := readEvents(resp.Body)
	var b struct {
		Lines []string `json:"lines"`
		Reset bool     `json:"reset"`
	}
	raw := next(t, events, "lines")
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(b.Lines, "\n")
	if !b.Reset || !strings.HasPrefix(text, "first line") || !strings.HasSuffix(text, "last line") {
		t.Fatalf("kept lines not in order: %s", raw)
	}
	if strings.Contains(text, "engine-key-abcdef") || strings.Contains(text, "callers-token-123") {
		t.Fatalf("a key in the output is not masked: %s", text)
	}
	// a second start prints the lines again: they arrive live, after the first
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = e.Start(ctx)
	var got []string
	for len(got) < 4 {
		var more struct {
			Lines []string `json:"lines"`
			Reset bool     `json:"reset"`
		}
		if err := json.Unmarshal([]byte(next(t, events, "lines")), &more); err != nil {
			t.Fatal(err)
		}
		if more.Reset {
			t.Fatal("a live batch claims to start over")
		}
		got = append(got, more.Lines...)
	}
	if got[0] != "first line" || got[3] != "last line" {
		t.Fatalf("live lines out of order: %q", got)
	}
}

func TestActionsGoToTheSource(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}}
	ts, _ := newTestServer(t, src, NewKeys([]string{"k1"}))
	for _, path := range []string{"/llm/api/engines/cloud/start", "/llm/api/engines/cloud/stop?drain=true"} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	if fmt.Sprint(src.acts) != "[start cloud false stop cloud true]" {
		t.Fatalf("actions: %v", src.acts)
	}
}

func TestConfigRefusesPathsThatCollide(t *testing.T) {
	for _, p := range []string{"", "llm", "/", "/llm/", "/v1", "/v1/ui", "/a b", "/{x}"} {
		if err := (Config{Path: p}).Validate(); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
	if err := (Config{Path: "/llm", Recent: 500}).Validate(); err != nil {
		t.Fatal(err)
	}
	if (Config{Path: "/llm"}).RecentOrDefault() != DefaultRecent {
		t.Fatal("default")
	}
}

func TestCloseEndsTheStreams(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}}
	board := NewBoard(5)
	s := &Server{Prefix: "/llm", Board: board, Source: src}
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp := get(t, ts, "/llm/api/events", "")
	events := readEvents(resp.Body)
	next(t, events, "state")
	s.Close()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the stream outlived Close")
		}
	}
}

func TestStateShowsTheEnginesAndModelsBreakers(t *testing.T) {
	e := remoteEngine(t, "cloud")
	for range 10 {
		e.ModelBreaker("cloud-model").Failure()
	}
	s := &Server{Prefix: "/llm", Board: NewBoard(5), Source: &fakeSource{es: []*engines.Engine{e}}}
	snap := s.takeSnapshot(context.Background())
	v := snap.Engines[0]
	if v.Breaker != "closed" || v.ModelBreakers["cloud-model"] != "open" {
		t.Fatalf("engine breaker %s, model breakers %v", v.Breaker, v.ModelBreakers)
	}
}

func TestStartsAndRemoteProbesAreCountedOnTheInjectedClock(t *testing.T) {
	fake := clock.NewFake()
	board := NewBoard(5)
	board.SetClock(fake)
	board.EngineStarted("local", 2*time.Second)
	if start, _ := board.LastStart("local"); !start.At.Equal(fake.Now()) {
		t.Fatalf("start recorded at %v, the clock says %v", start.At, fake.Now())
	}
	s := &Server{Prefix: "/llm", Board: board, Clock: fake, Source: &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}}}
	probedAt := func() int64 { return s.takeSnapshot(context.Background()).Engines[0].RemoteProbedAtMs }
	first := probedAt()
	if first != fake.Now().UnixMilli() {
		t.Fatalf("probed at %d, the clock says %d", first, fake.Now().UnixMilli())
	}
	fake.Advance(remoteProbeEvery - time.Second)
	if again := probedAt(); again != first {
		t.Fatalf("probed again at %d before remoteProbeEvery had passed on the clock", again)
	}
	fake.Advance(time.Second)
	if later := probedAt(); later != fake.Now().UnixMilli() {
		t.Fatalf("probed at %d once remoteProbeEvery had passed, want %d", later, fake.Now().UnixMilli())
	}
}

// pagePost sends a POST of the page's API with key, returning status and body.
func pagePost(t *testing.T, ts *httptest.Server, path, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestStateShowsEachKeysLimitsWithMomentsThatStayTheSameBytes(t *testing.T) {
	reset := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	s := &Server{Prefix: "/llm", Board: NewBoard(5), Source: &fakeSource{keys: teamUsage(t, reset)}}
	first, _ := json.Marshal(s.takeSnapshot(context.Background()))
	want := `"keys":[{"name":"team-a","limits":[` +
		fmt.Sprintf(`{"kind":"requests","limit":"60/m","max":60,"used":12,"remaining":48,"reset_at":%d},`, reset.UnixMilli()) +
		fmt.Sprintf(`{"kind":"tokens","limit":"200k/d","max":200000,"used":1500,"reserved":300,"remaining":198200,"reset_at":%d}]}]`, reset.UnixMilli())
	if !strings.Contains(string(first), want) {
		t.Fatalf("snapshot:\n%s\nwant in it:\n%s", first, want)
	}
	// the page counts down to reset_at itself: the snapshot holds no "time
	// left", so taken again it is the same bytes and a stream does not send it
	if again, _ := json.Marshal(s.takeSnapshot(context.Background())); string(again) != string(first) {
		t.Fatalf("an unchanged snapshot changed:\n%s\n%s", first, again)
	}
	// no keys with limits: an empty list, which the page hides
	none, _ := json.Marshal((&Server{Prefix: "/llm", Board: NewBoard(5), Source: &fakeSource{}}).takeSnapshot(context.Background()))
	if !strings.Contains(string(none), `"keys":[]`) {
		t.Fatalf("without keys: %s", none)
	}
}

func TestResetOfAKeyGoesToTheSourceAndShowsAtOnce(t *testing.T) {
	src := &fakeSource{es: []*engines.Engine{remoteEngine(t, "cloud")}, keys: teamUsage(t, time.Now().Add(time.Hour))}
	ts, _ := newTestServer(t, src, NewKeys([]string{"k1"}))
	events := readEvents(get(t, ts, "/llm/api/events", "k1").Body)
	if state := next(t, events, "state"); !strings.Contains(state, `"used":12`) {
		t.Fatalf("before the reset: %s", state)
	}
	if status, body := pagePost(t, ts, "/llm/api/keys/team-a/reset", "k1"); status != 200 || !strings.Contains(body, `"key":"team-a"`) {
		t.Fatalf("reset: %d %s", status, body)
	}
	// the open stream sends the zeroed counters
	state := next(t, events, "state")
	if strings.Contains(state, `"used":12`) || !strings.Contains(state, `"used":0`) {
		t.Fatalf("after the reset: %s", state)
	}
	// a key the gateway does not limit: the source's 404, not a 500
	if status, body := pagePost(t, ts, "/llm/api/keys/nobody/reset", "k1"); status != http.StatusNotFound || !strings.Contains(body, `no key named \"nobody\"`) {
		t.Fatalf("reset of an unknown key: %d %s", status, body)
	}
	if fmt.Sprint(src.acts) != "[reset team-a reset nobody]" {
		t.Fatalf("actions: %v", src.acts)
	}
}

func TestAnEngineWithMaxConcurrentShowsItsPlacesAndQueue(t *testing.T) {
	e, err := engines.New(engines.Config{Name: "gpu", To: "http://127.0.0.1:9", Models: []string{"gpu"}, MaxConcurrent: 4, Queue: 8}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Destruct() })
	s := &Server{Prefix: "/llm", Board: NewBoard(5), Source: &fakeSource{es: []*engines.Engine{e, remoteEngine(t, "plain")}}}
	b, _ := json.Marshal(s.takeSnapshot(context.Background()))
	if !strings.Contains(string(b), `"limit":{"max_concurrent":4,"in_flight":0,"queue":8,"queued":0}`) {
		t.Fatalf("the engine's limit is not in the snapshot: %s", b)
	}
	if n := strings.Count(string(b), `"limit":{`); n != 1 {
		t.Fatalf("%d engines show a limit, want only gpu: %s", n, b)
	}
}
