package quota

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgateway/caddy-llm-gateway/internal/boltfile"
)

// boltStore is the embedded store: one bbolt file holding, per key and
// counter, the window it belongs to and its count. Only the current windows
// matter; older records are deleted when read or overwritten.
//
// Record layout (bucket "counters/v1"):
//
//	key:   row (1 byte: 0 requests, 1 tokens, 2 spend) | window (1 byte) | key name
//	value: window start, unix seconds (8 bytes, big endian) | count (8 bytes)
//
// The file is shared (internal/boltfile): the request history keeps its
// own bucket in it.
type boltStore struct {
	path string
	file *boltfile.File
	db   *bolt.DB
}

var countersBucket = []byte("counters/v1")

// errStoreHeld: another process has the file locked.
var errStoreHeld = boltfile.ErrHeld

// openBoltStore opens (or creates) the file. bbolt locks it: a second
// process on the same file waits up to wait, then gets errStoreHeld.
func openBoltStore(path string, wait time.Duration) (*boltStore, error) {
	f, err := boltfile.Open(path, wait)
	if errors.Is(err, boltfile.ErrHeld) {
		return nil, fmt.Errorf("quota store %s is %w (a second server on one data directory, or caddy validate beside a running one?); counting in memory until it is free", path, errStoreHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("opening quota store %s: %v", path, err)
	}
	db := f.DB()
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(countersBucket)
		return err
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("quota store %s: %v", path, err)
	}
	return &boltStore{path: path, file: f, db: db}, nil
}

// load returns the records of the windows current at now and deletes the
// others.
func (s *boltStore) load(now int64) ([]record, error) {
	var recs []record
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(countersBucket)
		var stale [][]byte
		err := b.ForEach(func(k, v []byte) error {
			r, ok := decodeRecord(k, v)
			if start, end := r.window.bounds(now); !ok || r.start != start {
				stale = append(stale, append([]byte(nil), k...))
			} else {
				r.end = end
				recs = append(recs, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading quota store %s: %v", s.path, err)
	}
	return recs, nil
}

// save writes records in one transaction; a zero count is deleted.
func (s *boltStore) save(recs []record) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(countersBucket)
		for _, r := range recs {
			k := recordKey(r)
			if r.used == 0 {
				if err := b.Delete(k); err != nil {
					return err
				}
				continue
			}
			v := make([]byte, 16)
			binary.BigEndian.PutUint64(v, uint64(r.start))
			binary.BigEndian.PutUint64(v[8:], uint64(r.used))
			if err := b.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing quota store %s: %v", s.path, err)
	}
	return nil
}

func (s *boltStore) close() error { return s.file.Close() }

func recordKey(r record) []byte {
	k := make([]byte, 2, 2+len(r.key))
	k[0], k[1] = byte(r.row), byte(r.window)
	return append(k, r.key...)
}

func decodeRecord(k, v []byte) (record, bool) {
	if len(k) < 2 || len(v) != 16 || k[0] >= numRows || Window(k[1]) >= numWindows {
		return record{}, false
	}
	return record{
		key:    string(k[2:]),
		row:    int(k[0]),
		window: Window(k[1]),
		start:  int64(binary.BigEndian.Uint64(v)),
		used:   int64(binary.BigEndian.Uint64(v[8:])),
	}, true
}
