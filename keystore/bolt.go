package keystore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgateway/caddy-llm-gateway/internal/boltfile"
)

// boltStore keeps the records in the file of the key counters and the
// request history (internal/boltfile), in buckets of its own:
//
//	keys/v1        name → the record's JSON
//	keys/v1/use    name → last use (unix ms), requests, tokens: 8 bytes each, big endian
//	keys/v1/meta   "check" → the secret's check value
type boltStore struct {
	path string
	file *boltfile.File
	db   *bolt.DB
}

var (
	recordsBucket = []byte("keys/v1")
	useBucket     = []byte("keys/v1/use")
	metaBucket    = []byte("keys/v1/meta")
	checkKey      = []byte("check")
)

// errHeld: another process has the file locked.
var errHeld = boltfile.ErrHeld

func openBolt(path string, wait time.Duration) (*boltStore, error) {
	f, err := boltfile.Open(path, wait)
	if errors.Is(err, boltfile.ErrHeld) {
		return nil, fmt.Errorf("the issued keys' store %s is %w (a second server on one data directory, or caddy validate beside a running one?); no issued key is accepted until it is free", path, errHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the issued keys' store %s: %v", path, err)
	}
	db := f.DB()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{recordsBucket, useBucket, metaBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("the issued keys' store %s: %v", path, err)
	}
	return &boltStore{path: path, file: f, db: db}, nil
}

func (s *boltStore) load(context.Context) (map[string][]byte, []byte, int64, error) {
	recs := map[string][]byte{}
	var check []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		check = bytes.Clone(tx.Bucket(metaBucket).Get(checkKey))
		return tx.Bucket(recordsBucket).ForEach(func(k, v []byte) error {
			recs[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading the issued keys' store %s: %v", s.path, err)
	}
	return recs, check, 0, nil
}

func (s *boltStore) version(context.Context) (int64, error) { return 0, nil }

func (s *boltStore) get(_ context.Context, name string) ([]byte, error) {
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(recordsBucket).Get([]byte(name)))
		return nil
	})
	return v, err
}

func (s *boltStore) swap(_ context.Context, name string, old, new []byte, max int) (swapResult, error) {
	res := swapped
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(recordsBucket)
		cur := b.Get([]byte(name))
		switch {
		case !bytes.Equal(cur, old) || (cur == nil) != (old == nil):
			res = swapConflict
			return nil
		case new == nil:
			if err := tx.Bucket(useBucket).Delete([]byte(name)); err != nil {
				return err
			}
			return b.Delete([]byte(name))
		case old == nil && max > 0 && b.Stats().KeyN >= max:
			res = swapFull
			return nil
		}
		return b.Put([]byte(name), new)
	})
	if err != nil {
		return 0, fmt.Errorf("writing the issued keys' store %s: %v", s.path, err)
	}
	return res, nil
}

func (s *boltStore) setCheck(_ context.Context, check []byte) ([]byte, error) {
	var stored []byte
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(metaBucket)
		if v := b.Get(checkKey); v != nil {
			stored = bytes.Clone(v)
			return nil
		}
		stored = check
		return b.Put(checkKey, check)
	})
	return stored, err
}

func (s *boltStore) addUse(_ context.Context, deltas map[string]Use, names []string) (map[string]Use, error) {
	totals := map[string]Use{}
	err := s.db.Update(func(tx *bolt.Tx) error {
		recs, b := tx.Bucket(recordsBucket), tx.Bucket(useBucket)
		for name, d := range deltas {
			if recs.Get([]byte(name)) == nil {
				continue // revoked meanwhile
			}
			u := decodeUse(b.Get([]byte(name))).plus(d)
			if err := b.Put([]byte(name), encodeUse(u)); err != nil {
				return err
			}
		}
		for _, name := range names {
			totals[name] = decodeUse(b.Get([]byte(name)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("writing the issued keys' use to %s: %v", s.path, err)
	}
	return totals, nil
}

func (s *boltStore) close() error { return s.file.Close() }

func encodeUse(u Use) []byte {
	b := make([]byte, 24)
	var last int64
	if !u.LastUsed.IsZero() {
		last = u.LastUsed.UnixMilli()
	}
	binary.BigEndian.PutUint64(b, uint64(last))
	binary.BigEndian.PutUint64(b[8:], uint64(u.Requests))
	binary.BigEndian.PutUint64(b[16:], uint64(u.TokensUsed))
	return b
}

func decodeUse(b []byte) Use {
	if len(b) != 24 {
		return Use{}
	}
	var u Use
	if last := int64(binary.BigEndian.Uint64(b)); last > 0 {
		u.LastUsed = time.UnixMilli(last).UTC()
	}
	u.Requests = int64(binary.BigEndian.Uint64(b[8:]))
	u.TokensUsed = int64(binary.BigEndian.Uint64(b[16:]))
	return u
}

// plus is u with d's counts added and the later of their last uses.
func (u Use) plus(d Use) Use {
	u.Requests += d.Requests
	u.TokensUsed += d.TokensUsed
	if d.LastUsed.After(u.LastUsed) {
		u.LastUsed = d.LastUsed
	}
	return u
}
