package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func fakeClock() *clock.Fake { return clock.NewFake() }

func rec(c clock.Clock, model string, status int) Record {
	return Record{Time: c.Now().UnixMilli(), Path: "/v1/chat/completions", Model: model, Engine: "e-" + model, Key: "team-" + model,
		Status: status, TTFBMs: 12, DurationMs: 40, TokensIn: 3, TokensOut: 5,
		Tries: []Try{{Engine: "e-" + model, Reason: "ok", Status: status, DurationMs: 40}}}
}

// each runs a test on the file and in memory.
func each(t *testing.T, test func(t *testing.T, open func(keep int, maxAge time.Duration) *Store, c *clock.Fake)) {
	for _, where := range []string{"file", "memory"} {
		t.Run(where, func(t *testing.T) {
			path := ""
			if where == "file" {
				path = filepath.Join(t.TempDir(), "quota.db")
			}
			c := fakeClock()
			var opened []*Store
			t.Cleanup(func() {
				for _, s := range opened {
					s.Close()
				}
			})
			test(t, func(keep int, maxAge time.Duration) *Store {
				s, err := Open(Options{Path: path, Keep: keep, MaxAge: maxAge, Clock: c})
				if err != nil {
					t.Fatal(err)
				}
				opened = append(opened, s)
				return s
			}, c)
		})
	}
}

func models(rs []Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Model)
	}
	return out
}

func TestHistoryKeepsTheNewestKeepRecords(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(3, 0)
		for i := range 5 {
			s.Add(rec(c, fmt.Sprint("m", i), 200))
		}
		s.Sync()
		got, err := s.Query(Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(models(got)) != "[m4 m3 m2]" || got[0].Seq != 5 {
			t.Fatalf("kept %v (first seq %d), want the newest 3 newest first", models(got), got[0].Seq)
		}
		if got[0].Tries[0].Reason != "ok" || got[0].Key != "team-m4" || got[0].TokensOut != 5 {
			t.Fatalf("record %+v", got[0])
		}
	})
}

func TestHistoryForgetsRequestsOlderThanMaxAge(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(100, time.Hour)
		s.Add(rec(c, "old", 200))
		c.Advance(50 * time.Minute)
		s.Add(rec(c, "new", 200))
		s.Sync()
		c.Advance(20 * time.Minute)
		got, _ := s.Query(Filter{})
		if fmt.Sprint(models(got)) != "[new]" {
			t.Fatalf("after 70 minutes, kept %v, want only the request of 20 minutes ago", models(got))
		}
	})
}

func TestHistoryFiltersAndPages(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(0, 0)
		for i := range 10 {
			status := 200
			if i%3 == 0 {
				status = 503
			}
			r := rec(c, []string{"a", "b"}[i%2], status)
			// a's client spoke Messages to a Chat engine, b's Chat
			r.API, r.EngineAPI = []string{"messages", "chat"}[i%2], "chat"
			s.Add(r)
			c.Advance(time.Second)
		}
		s.Sync()
		for _, tc := range []struct {
			f    Filter
			want int
		}{
			{Filter{Model: "a"}, 5},
			{Filter{Key: "team-b"}, 5},
			{Filter{Status: "5xx"}, 4},
			{Filter{Status: "error"}, 4},
			{Filter{Status: "200"}, 6},
			{Filter{Model: "a", Status: "503"}, 2},
			{Filter{Engine: "e-b"}, 5},
			{Filter{Since: c.Now().Add(-3 * time.Second).UnixMilli()}, 3},
			{Filter{API: "translated"}, 5},
			{Filter{API: "messages"}, 5},
			{Filter{API: "chat"}, 10}, // spoken by the client or the engine
			{Filter{API: "responses"}, 0},
		} {
			if got, _ := s.Query(tc.f); len(got) != tc.want {
				t.Errorf("%+v: %d records, want %d", tc.f, len(got), tc.want)
			}
		}
		var seen []uint64
		f := Filter{Limit: 4}
		for {
			page, _ := s.Query(f)
			if len(page) == 0 {
				break
			}
			for _, r := range page {
				seen = append(seen, r.Seq)
			}
			f.Before = page[len(page)-1].Seq
		}
		if fmt.Sprint(seen) != "[10 9 8 7 6 5 4 3 2 1]" {
			t.Fatalf("paged through %v", seen)
		}
	})
}

func TestHistorySurvivesReopening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	c := fakeClock()
	s, err := Open(Options{Path: path, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(rec(c, "before", 200))
	if err := s.Close(); err != nil { // the last handle: writes what is queued
		t.Fatal(err)
	}
	s, err = Open(Options{Path: path, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Add(rec(c, "after", 200))
	s.Sync()
	got, _ := s.Query(Filter{})
	if fmt.Sprint(models(got)) != "[after before]" || got[0].Seq != 2 {
		t.Fatalf("after reopening: %v", got)
	}
}

func TestTwoHandlesShareOneHistory(t *testing.T) {
	// a reload: the next config opens before the old one closes
	path := filepath.Join(t.TempDir(), "quota.db")
	old, _ := Open(Options{Path: path})
	next, err := Open(Options{Path: path, Keep: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	old.Add(rec(clock.Real, "x", 200))
	old.Close()
	next.Sync()
	if got, _ := next.Query(Filter{}); len(got) != 1 {
		t.Fatalf("the next config sees %d records", len(got))
	}
	if keep, _ := next.Limits(); keep != 7 {
		t.Fatalf("keep %d: the newest config's limits apply", keep)
	}
}

func TestAddNeverWaitsForTheDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	s, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// hold the file's write transaction: the writer blocks in its first write
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// deferred after s.Close, so run before it: a failed assertion before
	// free below releases the transaction the writer, and Close, wait for
	defer free()
	go s.core.open().(*file).db.Update(func(*bolt.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	var queued int
	for range queueSize + maxBatch + 100 {
		if s.Add(rec(clock.Real, "m", 200)) {
			queued++
		}
	}
	if s.Dropped() == 0 || queued < queueSize {
		t.Fatalf("queued %d, dropped %d: want the queue full, then drops", queued, s.Dropped())
	}
	free()
	s.Sync()
	got, _ := s.Query(Filter{Limit: MaxLimit})
	if len(got) != MaxLimit {
		t.Fatalf("%d records after the disk came back", len(got))
	}
}

func TestCallersTextsAreCut(t *testing.T) {
	long := string(make([]byte, 1000))
	if n := len(Cut(long)); n > maxText+4 {
		t.Fatalf("cut to %d bytes", n)
	}
	if err := ParseStatus("5xx"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"6xx", "abc", "99", "x5xx"} {
		if ParseStatus(bad) == nil {
			t.Errorf("status %q accepted", bad)
		}
	}
}

func TestOpeningTouchesNoFileUntilTheFirstRecord(t *testing.T) {
	// caddy validate provisions a config and throws it away: nothing on disk
	path := filepath.Join(t.TempDir(), "data", "quota.db")
	s, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("Open created %s: %v", filepath.Dir(path), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("Close created %s: %v", filepath.Dir(path), err)
	}
}

func TestAHeldFileKeepsTheHistoryInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	other, err := bolt.Open(path, 0o600, nil) // another process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	told := make(chan error, 1)
	s, err := Open(Options{Path: path, OnError: func(err error) { told <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Add(rec(clock.Real, "m", 200))
	s.Sync()
	if err := <-told; !errors.Is(err, ErrHeld) || !s.InMemory() {
		t.Fatalf("told %v, in memory %v", err, s.InMemory())
	}
	if got, _ := s.Query(Filter{}); len(got) != 1 {
		t.Fatalf("kept %d records", len(got))
	}
}

// A reopened file knows how many records it holds without reading them
// all (countOf), and keeps pruning to keep from the oldest.
func TestAReopenedFileKeepsKeep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quota.db")
	c := fakeClock()
	for round := range 3 {
		s, err := Open(Options{Path: path, Keep: 10, Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 7 {
			s.Add(rec(c, fmt.Sprint("m", round*7+i), 200))
		}
		s.Sync()
		if n, want := s.core.b.(*file).count, min(10, (round+1)*7); n != want {
			t.Fatalf("round %d: the writer counts %d records, want %d", round, n, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(Options{Path: path, Keep: 10, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ := s.Query(Filter{})
	if fmt.Sprint(models(got)) != "[m20 m19 m18 m17 m16 m15 m14 m13 m12 m11]" || s.core.b.(*file).count != 10 {
		t.Fatalf("after three runs of 7 with keep 10: %v, counted %d", models(got), s.core.b.(*file).count)
	}
}
