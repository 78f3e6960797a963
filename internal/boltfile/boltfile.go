// Package boltfile shares one embedded bbolt file among the parts of the
// process that keep data in it (the key limits' counters, the request
// history), each in its own bucket. bbolt locks its file per open: a second
// bolt.Open of the same file in the same process would wait for the first,
// so every user takes a handle on one shared *bolt.DB, and the last handle
// closes it.
package boltfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrHeld: another process has the file locked.
var ErrHeld = errors.New("held by another process")

// File is one handle on a shared bbolt file.
type File struct {
	shared *shared
	once   sync.Once
}

type shared struct {
	key  string
	db   *bolt.DB
	refs int // registry's lock
}

var registry = struct {
	sync.Mutex
	files map[string]*shared
}{files: map[string]*shared{}}

// Open returns a handle on the file at path, opening (or creating) it and
// its directory if this process has no handle on it yet. When another
// process holds the file, Open waits up to wait, then fails with ErrHeld.
func Open(path string, wait time.Duration) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	registry.Lock()
	defer registry.Unlock()
	if s := registry.files[abs]; s != nil {
		s.refs++
		return &File{shared: s}, nil
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	db, err := bolt.Open(abs, 0o600, &bolt.Options{Timeout: wait})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, ErrHeld
	}
	if err != nil {
		return nil, err
	}
	s := &shared{key: abs, db: db, refs: 1}
	registry.files[abs] = s
	return &File{shared: s}, nil
}

// DB is the shared database. It stays open until the last handle closes.
func (f *File) DB() *bolt.DB { return f.shared.db }

// Path is the file's absolute path.
func (f *File) Path() string { return f.shared.key }

// Close lets go of the handle; the last one closes the file. Closing twice
// is harmless.
func (f *File) Close() error {
	var err error
	f.once.Do(func() {
		registry.Lock()
		defer registry.Unlock()
		s := f.shared
		s.refs--
		if s.refs > 0 {
			return
		}
		delete(registry.files, s.key)
		err = s.db.Close()
	})
	return err
}
