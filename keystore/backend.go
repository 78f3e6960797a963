package keystore

import "context"

// backend is where the records live: the embedded file or Redis. Records
// travel as their JSON, so that a swap compares what is stored byte for
// byte.
type backend interface {
	// load reads every record by name, the secret's check value (nil when
	// none is stored) and the version.
	load(ctx context.Context) (recs map[string][]byte, check []byte, version int64, err error)
	// version moves whenever a record changes; the embedded store, which
	// has no other writer, keeps it still.
	version(ctx context.Context) (int64, error)
	// get reads one record; nil when there is none.
	get(ctx context.Context, name string) ([]byte, error)
	// swap replaces name's record old with new, atomically: old nil
	// creates it (swapFull when max records exist already), new nil
	// deletes it and its use.
	swap(ctx context.Context, name string, old, new []byte, max int) (swapResult, error)
	// setCheck stores the secret's check value unless one is, and returns
	// the stored one.
	setCheck(ctx context.Context, check []byte) ([]byte, error)
	// addUse adds deltas to the use of names that have a record (a later
	// last use wins) and returns the totals of every name in names.
	addUse(ctx context.Context, deltas map[string]Use, names []string) (map[string]Use, error)
	close() error
}

type swapResult int

const (
	swapped swapResult = iota
	swapConflict
	swapFull
)
