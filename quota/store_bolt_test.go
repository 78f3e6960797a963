package quota

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// stored reads the embedded store's records through the limiter's own
// handle (bbolt locks the file against a second open).
func stored(t *testing.T, l *Limiter) map[string]record {
	t.Helper()
	recs := map[string]record{}
	err := l.core.file.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(countersBucket).ForEach(func(k, v []byte) error {
			r, ok := decodeRecord(k, v)
			if !ok {
				t.Errorf("undecodable record %q", k)
			}
			recs[r.key+"/"+"rt"[r.row:r.row+1]+"/"+r.window.String()] = r
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestCountersSurviveCloseAndReopen(t *testing.T) {
	clock := clockAt(3 * time.Hour)
	path := filepath.Join(t.TempDir(), "quota.db")
	r := rules(t, []string{"10/m", "100/d"}, []string{"5k/d"})
	l, err := Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		tk, _ := l.Admit("team-a", r, 100)
		tk.Done(250)
	}
	if err := l.Close(); err != nil { // a restart: Close writes what is left
		t.Fatal(err)
	}

	l, err = Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	u := l.Usage("team-a", r)
	if u.Limits[0].Used != 4 || u.Limits[1].Used != 4 || u.Limits[2].Used != 1000 {
		t.Fatalf("after reopening: %+v", u)
	}
	for range 6 {
		l.Admit("team-a", r, 0)
	}
	if _, d := l.Admit("team-a", r, 0); d.OK || d.Reason != ReasonRate {
		t.Errorf("the reopened limiter forgot the first four requests: %+v", d)
	}
	l.Close()

	// a day later every window is stale: nothing is loaded, and the stale
	// records are gone from the file
	clock.Advance(24 * time.Hour)
	l, err = Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if u := l.Usage("team-a", r); u.Limits[0].Used != 0 || u.Limits[1].Used != 0 || u.Limits[2].Used != 0 {
		t.Errorf("a day later: %+v", u)
	}
	if recs := stored(t, l); len(recs) != 0 {
		t.Errorf("stale records kept: %+v", recs)
	}
}

func TestTwoLimitersOnOnePathShareCounters(t *testing.T) {
	// a config reload: the new config opens the store before the old one
	// closes it, and both count in the same counters
	clock := clockAt(0)
	path := filepath.Join(t.TempDir(), "quota.db")
	r := rules(t, []string{"5/m"}, nil)
	old, err := Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		old.Admit("k", r, 0)
	}
	// the same file by another spelling of its path is the same store
	next, err := Open(Config{Path: filepath.Join(filepath.Dir(path), ".", "quota.db"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	next.Admit("k", r, 0)
	old.Admit("k", r, 0)
	if _, d := next.Admit("k", r, 0); d.OK {
		t.Fatal("two handles on one store counted separately")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	old.Close() // twice is harmless and does not close the store under next
	if _, d := next.Admit("k", r, 0); d.OK || d.Requests.Remaining != 0 {
		t.Fatalf("after the old config closed: %+v", d)
	}
	if err := next.Sync(); err != nil {
		t.Fatal(err)
	}
	if rec := stored(t, next)["k/r/m"]; rec.used != 5 {
		t.Errorf("stored %+v", rec)
	}
	// another process on the same file waits for it (this process's
	// users share one open file: internal/boltfile)
	if db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Millisecond}); err == nil {
		db.Close()
		t.Errorf("a second open of a held file succeeded")
	}
}

func TestAHeldFileIsADegradedStoreNotAnError(t *testing.T) {
	// caddy validate provisions beside the running server, whose process
	// holds the file: the config must still load
	clock := clockAt(0)
	path := filepath.Join(t.TempDir(), "quota.db")
	r := rules(t, []string{"10/m"}, nil)
	first, err := Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	first.Admit("k", r, 0)
	first.Admit("k", r, 0)
	first.Close()

	other, err := bolt.Open(path, 0o600, nil) // the other process
	if err != nil {
		t.Fatal(err)
	}
	var told []error
	l, err := Open(Config{Path: path, Clock: clock, OnDegraded: func(err error) { told = append(told, err) }})
	if err != nil {
		other.Close()
		t.Fatalf("Open of a held file: %v", err)
	}
	defer l.Close()
	if !l.Degraded() || len(told) != 1 || !errors.Is(told[0], errStoreHeld) {
		t.Fatalf("degraded %v, hook told %v", l.Degraded(), told)
	}
	for range 3 {
		if _, d := l.Admit("k", r, 0); !d.OK {
			t.Fatal(d)
		}
	}
	if err := l.Sync(); !errors.Is(err, errStoreHeld) {
		t.Errorf("sync while held: %v", err)
	}
	other.Close()
	// the next save takes the file and adds what it held to what was
	// counted meanwhile
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.Degraded() || len(told) != 2 || told[1] != nil {
		t.Errorf("after the file came free: degraded %v, hook told %v", l.Degraded(), told)
	}
	if u := l.Usage("k", r).Limits[0]; u.Used != 5 {
		t.Errorf("counted %d requests, want 2 from the file + 3 in memory", u.Used)
	}
	if rec := stored(t, l)["k/r/m"]; rec.used != 5 {
		t.Errorf("stored %+v", rec)
	}
}

func TestEmbeddedStoreIsWrittenInTheBackground(t *testing.T) {
	clock := clockAt(0)
	path := filepath.Join(t.TempDir(), "quota.db")
	l, err := Open(Config{Path: path, Clock: clock, FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := rules(t, []string{"60/m"}, []string{"1k/h"})
	tk, _ := l.Admit("k", r, 10)
	tk.Done(42)
	if recs := stored(t, l); len(recs) != 0 {
		t.Fatalf("written before the flush: %+v", recs)
	}
	clock.WaitForTimers(1) // the writer waits for its interval
	clock.Advance(time.Second)
	clock.WaitForTimers(1) // re-armed: the write is over
	recs := stored(t, l)
	if recs["k/r/m"].used != 1 || recs["k/t/h"].used != 42 || recs["k/t/h"].start != clock.Now().Unix()-1 {
		t.Errorf("after one flush: %+v", recs)
	}
	// a Reset reaches the file too (zero counts are deleted)
	l.Reset("k")
	clock.Advance(time.Second)
	clock.WaitForTimers(1)
	if recs := stored(t, l); len(recs) != 0 {
		t.Errorf("after Reset and a flush: %+v", recs)
	}
}

func TestAdmitNeverWaitsForTheStore(t *testing.T) {
	clock := clockAt(0)
	l, _ := openFile(t, clock)
	r := rules(t, []string{"1000/m"}, []string{"1M/d"})
	tk, _ := l.Admit("k", r, 1)
	tk.Done(1)
	// hold the file's write transaction, so that a flush blocks in the store
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// registered after openFile's Close, so run before it: a failed
	// assertion before free below releases the transaction Close waits for
	t.Cleanup(free)
	go l.core.file.db.Update(func(*bolt.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	flushed := make(chan error, 1) // a failed test does not read it
	go func() { flushed <- l.Sync() }()
	// requests go on while the flush waits for the disk
	for range 100 {
		tk, d := l.Admit("k", r, 10)
		if !d.OK {
			t.Fatal(d)
		}
		tk.Done(5)
	}
	free()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}
