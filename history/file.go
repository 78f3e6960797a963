package history

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgateway/caddy-llm-gateway/internal/boltfile"
)

// file keeps the records in the embedded bbolt file of the key counters, in
// a bucket of its own. bbolt reuses the pages of deleted records, so the
// file grows to what keep records need and stays there.
//
// Record layout (bucket "history/v1"):
//
//	key:   the record's number (8 bytes, big endian): oldest first
//	value: arrival, Unix milliseconds (8 bytes, big endian) | the record as
//	       JSON, seq 0 (encode.go)
type file struct {
	f     *boltfile.File
	db    *bolt.DB
	count int // records in the bucket; the writer's
}

var historyBucket = []byte("history/v1")

// maxPrune bounds the deletions of one write: a keep lowered by a reload
// is reached over a few writes rather than in one long transaction.
const maxPrune = 100_000

func openFile(path string) (*file, error) {
	f, err := boltfile.Open(path, time.Second)
	if err != nil {
		return nil, err
	}
	fl := &file{f: f, db: f.DB()}
	err = fl.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(historyBucket)
		if err != nil {
			return err
		}
		fl.count = countOf(b)
		return nil
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return fl, nil
}

func (fl *file) write(recs []Record, keep int, cutoff int64) error {
	err := fl.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(historyBucket)
		if b == nil {
			return fmt.Errorf("no bucket %s", historyBucket)
		}
		b.FillPercent = 1 // keys only ever grow: full pages, not half-empty ones
		// the batch's keys and values in a few large buffers, each
		// encoded in a scratch one first: bbolt keeps them until the commit
		var chunk, kv []byte
		for i := range recs {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			recs[i].Seq = seq
			kv = appendValue(binary.BigEndian.AppendUint64(kv[:0], seq), &recs[i])
			if cap(chunk)-len(chunk) < len(kv) {
				chunk = make([]byte, 0, max(64<<10, len(kv)))
			}
			at := len(chunk)
			chunk = append(chunk, kv...)
			if err := b.Put(chunk[at:at+8:at+8], chunk[at+8:len(chunk):len(chunk)]); err != nil {
				return err
			}
		}
		fl.count += len(recs)
		// the oldest records past keep or cutoff, found first and then
		// deleted by key: a cursor's First after each Delete walks the
		// leaves already emptied (bbolt rebalances them at the commit),
		// which made pruning quadratic in a batch
		var prune []uint64
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(prune) < maxPrune; k, v = c.Next() {
			if fl.count-len(prune) <= keep && timeOf(v) >= cutoff {
				break
			}
			prune = append(prune, binary.BigEndian.Uint64(k))
		}
		var key [8]byte
		for _, seq := range prune {
			binary.BigEndian.PutUint64(key[:], seq)
			if err := b.Delete(key[:]); err != nil {
				return err
			}
			fl.count--
		}
		return nil
	})
	if err != nil {
		// the transaction rolled back: count again
		_ = fl.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(historyBucket); b != nil {
				fl.count = countOf(b)
			}
			return nil
		})
		return fmt.Errorf("writing the request history to %s: %v", fl.f.Path(), err)
	}
	return nil
}

func (fl *file) scan(f Filter, fn func(*Record) bool) error {
	stop := f.Since - lateness.Milliseconds()
	return fl.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(historyBucket)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Last()
		if f.Before != 0 {
			if k, _ = c.Seek(seqKey(f.Before)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		var r Record
		for ; k != nil; k, v = c.Prev() {
			t := timeOf(v)
			if t < stop {
				return nil
			}
			if t < f.Since {
				continue
			}
			r = Record{}
			if json.Unmarshal(v[8:], &r) != nil {
				continue // not ours to read: skip it
			}
			r.Seq = binary.BigEndian.Uint64(k)
			if f.match(&r) && !fn(&r) {
				return nil
			}
		}
		return nil
	})
}

func (fl *file) close() error { return fl.f.Close() }

// countOf is how many records the bucket holds, from its first and last
// keys: records are numbered in turn and only ever pruned from the oldest,
// so the numbers are a run. Counting them (bucket stats) walked every page
// of the file at the first request: 160 ms of CPU for 100,000 records, and
// a minute for the largest keep.
func countOf(b *bolt.Bucket) int {
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if len(first) != 8 || len(last) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(last) - binary.BigEndian.Uint64(first) + 1)
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

func timeOf(v []byte) int64 {
	if len(v) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}
