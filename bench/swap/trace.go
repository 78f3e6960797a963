//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// trace is the models asked for, in arrival order, one every interval.
type trace struct {
	models   []string
	interval time.Duration
}

// newTrace repeats order ("A B A A C A B C") times times.
func newTrace(order string, times int, interval time.Duration) trace {
	one := strings.Fields(order)
	var models []string
	for range times {
		models = append(models, one...)
	}
	return trace{models: models, interval: interval}
}

// engineNames are the distinct models of the trace, sorted: one engine each.
func (t trace) engineNames() []string {
	var names []string
	for _, m := range t.models {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	sort.Strings(names)
	return names
}

// outcome is one request of the trace.
type outcome struct {
	model      string
	sent, done time.Time
	status     int    // 0 when no answer came
	errType    string // an error answer's error.type or error.code, when it has one
	err        error  // transport error, or a body that did not arrive whole
}

func (o outcome) ok() bool { return o.err == nil && o.status == http.StatusOK }

// play sends every request of t at its arrival time, each in its own
// goroutine (an open loop: a slow answer delays nothing after it), and waits
// for every answer. It returns the outcomes in arrival order and when the
// first request left.
func play(ctx context.Context, client *http.Client, url, bearer string, t trace) ([]outcome, time.Time) {
	out := make([]outcome, len(t.models))
	var wg sync.WaitGroup
	start := time.Now()
	for i, model := range t.models {
		at := start.Add(time.Duration(i) * t.interval)
		if !sleepUntil(ctx, at) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = complete(ctx, client, url, bearer, model)
		}()
	}
	wg.Wait()
	return out, start
}

// complete sends one non-streaming chat completion and reads its answer.
func complete(ctx context.Context, client *http.Client, url, bearer, model string) outcome {
	o := outcome{model: model, sent: time.Now()}
	body := strings.NewReader(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		o.done, o.err = time.Now(), err
		return o
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	o.done, o.status, o.err = time.Now(), resp.StatusCode, err
	if o.status != http.StatusOK {
		o.errType = errorType(b)
	}
	if o.err == nil && o.status == http.StatusOK && !strings.Contains(string(b), `"chat.completion"`) {
		o.err = fmt.Errorf("200 without a chat.completion: %.80s", b)
	}
	return o
}

// errorType is the type (or code) of an OpenAI-style error body, so that a
// failure reads "status 429 concurrency_limit" rather than a bare status.
func errorType(body []byte) string {
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if e.Error.Type != "" {
		return e.Error.Type
	}
	if c, ok := e.Error.Code.(string); ok {
		return c
	}
	return ""
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// traceResult is one target's row.
type traceResult struct {
	target      string
	unavailable string // why the target did not run; empty when it did
	starts      int
	startsBy    map[string]int
	lastAnswer  time.Duration // first request sent -> last answer in
	p50, p95    time.Duration // sent -> whole answer, all requests
	requests    int
	failed      int
	failures    map[string]int // reason -> count
	crossCheck  string         // the target's own count of starts, when it has one
}

// summarize turns the outcomes into a row.
func summarize(target string, outs []outcome, start time.Time) traceResult {
	r := traceResult{target: target, requests: len(outs), failures: map[string]int{}}
	var lat []time.Duration
	var last time.Time
	for _, o := range outs {
		if o.sent.IsZero() {
			r.failed++
			r.failures["not sent"]++
			continue
		}
		lat = append(lat, o.done.Sub(o.sent))
		if o.done.After(last) {
			last = o.done
		}
		if !o.ok() {
			r.failed++
			r.failures[failureReason(o)]++
		}
	}
	slices.Sort(lat)
	r.p50, r.p95 = percentile(lat, 50), percentile(lat, 95)
	if !last.IsZero() {
		r.lastAnswer = last.Sub(start)
	}
	return r
}

func failureReason(o outcome) string {
	switch {
	case o.status != 0 && o.status != http.StatusOK:
		return strings.TrimSpace(fmt.Sprintf("status %d %s", o.status, o.errType))
	case o.err != nil:
		msg := o.err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:] // the cause, without the URL
		}
		return msg
	}
	return "unknown"
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1]
}
