//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// The door, round 2, after the door's four parts, in the same
// Caddy (the bursts of part 2 hold the lax spellings of the limits and of
// n):
//
//  5. reach: the `narrow` key (models bench) names the model `other` every
//     way a request can: directly, as body fallbacks (engine, engine/model),
//     as a JSON object before a form's parts (on a JSON route and on a form
//     route), with a byte order mark and in UTF-16 on /upstream/, with a
//     stream flag engines read as true: goal 0 upstream calls;
//  6. unsized bodies: ten chunked bodies of 100 MB at once, over max_body
//     (48 MiB): each refused (413, or 503 where max_body_in_flight came
//     first; a client that still sends may meet the closed connection
//     instead); Caddy's peak RSS, goal ≤ 1.2× its idle RSS + 2 ×
//     max_body_in_flight (128 MiB: what the bodies may hold, and the copy
//     that joins one);
//  7. (round 3) ten uploads of 40 MiB at once, with a Content-Length and
//     Expect: 100-continue: admitted whole or refused 503 before they are
//     sent; Caddy's peak RSS, the same goal (they held 400 MiB before).
//     It runs before 6, while Caddy's RSS is idle.
const (
	door2Bodies   = 10
	door2BodySize = 100 << 20
	door2MaxBody  = 48 << 20  // the door Caddy's max_body
	door2InFlight = 128 << 20 // its max_body_in_flight
	door2Upload   = 40 << 20
)

// door2Result is what runDoor2 measured.
type door2Result struct {
	reachTried, reachRefused int
	reachCalls               int64 // upstream calls the reach requests made

	bodiesSent, bodies413 int
	bodyEnds, uploadEnds  map[string]int // how each ended: its status, or the client's error
	idleKB, peakKB        int64          // Caddy's VmRSS before, VmHWM during the bodies

	uploadsSent, uploadsAdmitted, uploads503 int
	uploadIdleKB, uploadPeakKB               int64 // the same, for the uploads
}

// reachCalls are the ways to name `other` as the narrow key.
func reachCalls() []doorCall {
	other := `{"model":"other","stream":true,` + doorMessages + `}`
	form := func(model string) string {
		return other + "\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + model + "\r\n--b--\r\n"
	}
	formType := map[string]string{"Content-Type": "multipart/form-data; boundary=b"}
	failing := map[string]string{"X-Bench-Fail": "503"}
	return []doorCall{
		{method: http.MethodPost, path: chatPath, body: other},
		{method: http.MethodPost, path: chatPath, body: `{"model":"bench","fallbacks":["other"],` + doorMessages + `}`, header: failing},
		{method: http.MethodPost, path: chatPath, body: `{"model":"bench","fallbacks":["other/other"],` + doorMessages + `}`, header: failing},
		{method: http.MethodPost, path: chatPath, body: form("bench"), header: formType},
		{method: http.MethodPost, path: "/v1/audio/transcriptions", body: form("bench"), header: formType},
		{method: http.MethodPost, path: "/upstream/bench" + chatPath, body: "\xEF\xBB\xBF" + other},
		{method: http.MethodPost, path: "/upstream/bench" + chatPath, body: laxengine.UTF16LE(other)},
		{method: http.MethodPost, path: chatPath, body: `{"model":"bench","stream":"true",` + doorMessages + `}`},
	}
}

// runDoor2 runs parts 5 and 6 against the door's Caddy.
func runDoor2(ctx context.Context, e *env, client *http.Client, gw, up string) (door2Result, error) {
	var res door2Result
	calls := reachCalls()
	for i := range calls {
		calls[i].key = "narrow"
	}
	for _, a := range all(ctx, client, gw, "door-reach", calls) {
		res.reachTried++
		if a.err == nil && a.status >= 400 && a.status < 500 {
			res.reachRefused++
		} else {
			progress("door: reaching another model: %d %v %.200s", a.status, a.err, a.body)
		}
	}
	counts, err := upstreamCalls(ctx, up, false)
	if err != nil {
		return res, err
	}
	res.reachCalls = counts.sum("door-reach-", counts.Calls)

	// 7. sized uploads of 40 MiB, all at once: first, while Caddy's RSS
	// is idle (what the chunked bodies of 6 took stays mapped a while)
	pid := e.caddy.PID()
	var mu sync.Mutex
	var wg sync.WaitGroup
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return res, fmt.Errorf("door: resetting Caddy's peak RSS: %v", err)
	}
	idle, err := harness.RSS(pid)
	if err != nil {
		return res, err
	}
	res.uploadIdleKB = idle >> 10
	upload := []byte(`{"model":"bench","messages":[{"role":"user","content":"` + strings.Repeat("a", door2Upload) + `"}]}`)
	for range door2Bodies {
		wg.Go(func() {
			st, err := sendUpload(ctx, gw, upload)
			mu.Lock()
			res.uploadEnds = countEnd(res.uploadEnds, st, err)
			res.uploadsSent++
			switch st {
			case http.StatusOK:
				res.uploadsAdmitted++
			case http.StatusServiceUnavailable:
				res.uploads503++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if res.uploadPeakKB, err = peakRSSKB(pid); err != nil {
		return res, err
	}

	// 6. unsized bodies over max_body, all at once
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return res, fmt.Errorf("door: resetting Caddy's peak RSS: %v", err)
	}
	if idle, err = harness.RSS(pid); err != nil {
		return res, err
	}
	res.idleKB = idle >> 10
	for range door2Bodies {
		wg.Go(func() {
			st, err := sendUnsized(ctx, gw)
			mu.Lock()
			res.bodyEnds = countEnd(res.bodyEnds, st, err)
			res.bodiesSent++
			// refused: 413, 503, or, over HTTP/1.1, the connection the
			// gateway closed after its refusal while the client still sent
			if st == http.StatusRequestEntityTooLarge || st == http.StatusServiceUnavailable ||
				errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
				res.bodies413++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if res.peakKB, err = peakRSSKB(pid); err != nil {
		return res, err
	}
	return res, nil
}

// sendUpload sends body as the operator, with its Content-Length and
// Expect: 100-continue (as curl sends a large body), and answers the status.
func sendUpload(ctx context.Context, gw string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw+chatPath, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+doorToken("ops"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	resp, err := (&http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// sendUnsized sends a chunked body of door2BodySize bytes as the operator
// (no limits) and answers the status.
func sendUnsized(ctx context.Context, gw string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	body := io.MultiReader(strings.NewReader(`{"model":"bench","messages":"`), io.LimitReader(zeros{}, door2BodySize))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw+chatPath, body)
	if err != nil {
		return 0, err
	}
	req.ContentLength = -1 // chunked: the gateway cannot refuse it by its length
	req.Header.Set("Authorization", "Bearer "+doorToken("ops"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// countEnd counts how a request ended in ends: its status, or the
// client's error (a connection closed while the body was sent).
func countEnd(ends map[string]int, status int, err error) map[string]int {
	if ends == nil {
		ends = map[string]int{}
	}
	what := strconv.Itoa(status)
	if err != nil {
		what = err.Error()
		if i := strings.LastIndex(what, ": "); i >= 0 {
			what = what[i+2:]
		}
	}
	ends[what]++
	return ends
}

// endsText says ends, most first.
func endsText(ends map[string]int) string {
	var parts []string
	for what, n := range ends {
		parts = append(parts, fmt.Sprintf("%d × %s", n, what))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// zeros is an endless body of '0's.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// peakRSSKB is the process's VmHWM, in KiB.
func peakRSSKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := strings.Fields(string(rest))
			if len(f) == 2 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// addDoor2 turns round 2's counts into rows.
func (r *report) addDoor2(d door2Result) {
	r.doorCheck(fmt.Sprintf("a `models bench` key naming `other` %d ways: refused 4xx", d.reachTried), fmt.Sprintf("%d/%d", d.reachRefused, d.reachTried),
		"all", d.reachTried > 0 && d.reachRefused == d.reachTried)
	r.doorCheck("  upstream calls they made (answers from a model it may not use)", fmt.Sprint(d.reachCalls), "0", d.reachCalls == 0)
	limit := d.idleKB*12/10 + 2*door2InFlight>>10
	r.doorCheck(fmt.Sprintf("%d chunked %d MB bodies at once: peak RSS", door2Bodies, door2BodySize>>20),
		fmt.Sprintf("%d MB", d.peakKB>>10), fmt.Sprintf("<= %d MB", limit>>10), d.peakKB > 0 && d.peakKB <= limit && d.bodies413 == d.bodiesSent)
	r.doorInfo("  idle RSS / refused (413, 503, the connection closed)", fmt.Sprintf("%d MB / %d of %d (%s)", d.idleKB>>10, d.bodies413, d.bodiesSent, endsText(d.bodyEnds)))
	limit = d.uploadIdleKB*12/10 + 2*door2InFlight>>10
	r.doorCheck(fmt.Sprintf("%d uploads of %d MiB at once, max_body_in_flight %d MiB: peak RSS", door2Bodies, door2Upload>>20, door2InFlight>>20),
		fmt.Sprintf("%d MB", d.uploadPeakKB>>10), fmt.Sprintf("<= %d MB", limit>>10),
		d.uploadPeakKB > 0 && d.uploadPeakKB <= limit && d.uploadsAdmitted > 0 && d.uploadsAdmitted+d.uploads503 == d.uploadsSent)
	r.doorInfo("  idle RSS / admitted / refused 503", fmt.Sprintf("%d MB / %d / %d (%s)", d.uploadIdleKB>>10, d.uploadsAdmitted, d.uploads503, endsText(d.uploadEnds)))
}
