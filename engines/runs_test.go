package engines

import (
	"context"
	"testing"
	"time"
)

// A starting engine shows its pid and since when it starts, and
// its output says when each line came and which start printed it.
func TestAStartingEngineShowsItsPidAndItsOutputItsRuns(t *testing.T) {
	e := testEngine(t, "runs", nil, "--load-time", "2s")
	before := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	go e.Acquire(ctx, true) //nolint:errcheck // cancelled below: only the start matters
	defer cancel()
	for {
		st := e.Status()
		if st.State == "starting" && st.PID != 0 {
			if st.StartingSince.Before(before.Add(-time.Second)) || st.StartingSince.After(time.Now()) {
				t.Fatalf("starting since %s, asked at %s", st.StartingSince, before)
			}
			break
		}
		select {
		case <-e.Changed():
		case <-time.After(10 * time.Second): // an upper bound only
			t.Fatalf("no pid while starting: %+v", e.Status())
		}
	}
	for {
		lines, _, wake := e.TimedLines(0)
		if len(lines) > 0 {
			l := lines[len(lines)-1]
			if l.Run != 1 || l.At.Before(before) || l.Text == "" {
				t.Fatalf("line %+v: want the first run's, stamped after %s", l, before)
			}
			break
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("the engine printed nothing")
		}
	}
	if st := e.Status(); st.State == "ready" && !st.StartingSince.IsZero() {
		t.Fatalf("a ready engine says it is starting since %s", st.StartingSince)
	}
}

func TestLinesOfEachRunAreNumbered(t *testing.T) {
	var b lineBuffer
	b.add("before any start")
	b.newRun()
	b.add("first")
	b.newRun()
	b.add("second")
	lines, last, _ := b.timedSince(1)
	if last != 3 || len(lines) != 2 || lines[0].Run != 1 || lines[1].Run != 2 || lines[1].Text != "second" {
		t.Fatalf("%+v (last %d)", lines, last)
	}
	if got := b.last(3); len(got) != 3 || got[0] != "before any start" {
		t.Fatalf("last: %q", got)
	}
}
