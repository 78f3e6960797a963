package boltfile

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestHandlesShareOneFileAndTheLastClosesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir", "quota.db")
	a, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, time.Millisecond) // no wait: this process has it open
	if err != nil {
		t.Fatal(err)
	}
	if a.DB() != b.DB() {
		t.Fatal("two handles on one file have two databases")
	}
	a.Close()
	a.Close() // twice is harmless and leaves b's file open
	if err := b.DB().Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("x")); return err }); err != nil {
		t.Fatalf("the file closed under the other handle: %v", err)
	}
	b.Close()
	// closed: another process may have it now
	other, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("the last handle did not close the file: %v", err)
	}
	defer other.Close()
	if _, err := Open(path, time.Millisecond); !errors.Is(err, ErrHeld) {
		t.Fatalf("a file another process holds: %v", err)
	}
}
