package handler

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
)

// A body's pace (the door, round 3). A body with a Content-Length over the
// free 64 KiB takes all of it from max_body_in_flight before a byte is read
// (inflight.go), so that uploads are admitted whole or not at all. A
// client that claimed 40 MiB and sent a byte a second held them until
// body_timeout, 2 minutes by default: four such requests kept every upload
// out under a 128 MiB cap while sending next to nothing, and the gateway
// allocated what they claimed.
//
// Such a body keeps what it took only while it keeps the pace its
// body_timeout sets: all of its length within body_timeout, evenly, with
// up to paceLag of lag. At every moment it has sent at least the share of
// its length that the share of body_timeout gone asks for, less that lag;
// the moment it falls further behind, it is cut with 408 request_timeout
// naming its pace, and what it held goes back. A body that keeps the pace
// arrives within body_timeout, as it had to anyway; one that falls behind
// would mostly not have, and it no longer holds the others' share while it
// tries. Holding a reservation now costs about what it reserves in bytes
// sent, as an upload does; a client that claims and stalls holds it for
// the lag alone (10 s).
//
// The pace is a read deadline, moved at every read of the body: a stalled
// client is cut where it waits, with no timer of ours.

// paceLag is how far behind its even pace a body may fall: 10 s, or a
// twelfth of body_timeout when that is less (a short body_timeout is a
// tight pace by choice).
func paceLag(timeout time.Duration) time.Duration {
	return min(timeout/12, 10*time.Second)
}

// paceDeadline is when a body of length, started at start, that has sent
// got, falls behind its pace; behind is false when that is at or past
// body_timeout, which comes first.
func paceDeadline(start time.Time, timeout time.Duration, length, got int64) (at time.Time, behind bool) {
	end := start.Add(timeout)
	if got >= length {
		return end, false
	}
	// got bytes are the pace's at got/length of timeout, the lag after
	at = start.Add(paceLag(timeout) + time.Duration(float64(timeout)*(float64(got)/float64(length))))
	if !at.Before(end) {
		return end, false
	}
	return at, true
}

// pacedBody is a body read under its pace: each read moves the read
// deadline to when the body would fall behind.
type pacedBody struct {
	r       io.Reader
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	length  int64
	got     int64
	behind  bool // the deadline set last is the pace's, not body_timeout's
}

// paced is the pace's hook in readBodyOnce: the body of length, whose
// read deadline rc sets, read under its pace from now. (A function of
// its own, not the Gateway's: this file stays out of the package's cycle.)
func paced(rc *http.ResponseController, body io.Reader, length int64, timeout time.Duration) *pacedBody {
	p := &pacedBody{r: body, rc: rc, start: time.Now(), timeout: timeout, length: length}
	p.move()
	return p
}

func (p *pacedBody) move() {
	var at time.Time
	at, p.behind = paceDeadline(p.start, p.timeout, p.length, p.got)
	_ = p.rc.SetReadDeadline(at)
}

func (p *pacedBody) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 && err == nil {
		p.got += int64(n)
		p.move()
	}
	return n, err
}

// late is the 408 of a body that did not arrive in time: behind its pace,
// or (p nil or not behind) past body_timeout.
func late(p *pacedBody, timeout time.Duration) *apierror.Error {
	msg := "the request body did not arrive within the gateway's body_timeout of " + timeout.String()
	if p != nil && p.behind {
		kib := func(n float64) string { return fmt.Sprintf("%.0f KiB", n/1024) }
		msg = fmt.Sprintf("the request body fell behind its pace: %s of its Content-Length of %s arrived in %s. The gateway holds a body's whole length while it arrives, so it must arrive within body_timeout (%s) at an even pace, here %s/s, at most %s behind",
			kib(float64(p.got)), kib(float64(p.length)), time.Since(p.start).Round(time.Millisecond),
			p.timeout, kib(float64(p.length)/p.timeout.Seconds()), paceLag(p.timeout))
	}
	return &apierror.Error{Status: http.StatusRequestTimeout, Type: apierror.TypeInvalidRequest, Code: "request_timeout", Message: msg}
}
