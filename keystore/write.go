package keystore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The operator's calls: issue, update, rotate, revoke. Each is one
// compare-and-swap in the store (tried again when another front door
// changed the key in between), then the index here is rebuilt, so the
// front door that made a change serves it at once; the others find it in
// the store (the package doc says how soon).

// Issue makes a key with spec's name and rules and returns it and its
// token, which is shown this once and stored only as its hash.
func (s *Store) Issue(spec Spec) (Key, string, error) {
	c := s.core
	now := c.clock.Now().UTC()
	if err := spec.check(now); err != nil {
		return Key{}, "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writable(); err != nil {
		return Key{}, "", err
	}
	token := newToken()
	sum := c.sec.sum(token)
	r := record{Spec: spec, Created: now, Hash: sum[:]}
	b, err := json.Marshal(r)
	if err != nil {
		return Key{}, "", err
	}
	res, err := c.be.swap(context.Background(), spec.Name, nil, b, c.max)
	switch {
	case err != nil:
		return Key{}, "", c.failed(err)
	case res == swapConflict:
		return Key{}, "", Errorf(ErrExists, "key %s is issued already", spec.Name)
	case res == swapFull:
		return Key{}, "", Errorf(ErrFull, "%d keys are issued, the most this gateway keeps (issued_keys max): revoke one first", c.max)
	}
	c.recs[spec.Name] = &r
	c.rebuild()
	return r.view(Use{}, now), token, nil
}

// Update changes a key's rules, note or expiry: change edits a copy of what
// is stored (it may be called again, if another front door changed the key
// meanwhile). The name and the token stay.
func (s *Store) Update(name string, change func(*Spec) error) (Key, error) {
	var out Key
	err := s.core.modify(name, func(r *record, now time.Time) error {
		spec := r.Spec
		if err := change(&spec); err != nil {
			return err
		}
		spec.Name = name
		if err := spec.check(now); err != nil {
			return err
		}
		r.Spec, r.Updated = spec, now
		out = r.view(Use{}, now)
		return nil
	})
	if err != nil {
		return Key{}, err
	}
	got, _ := s.Get(name)
	out.Use = got.Use
	return out, nil
}

// Rotate gives a key a new token, returned this once; the old one is
// still accepted for overlap (0: refused at once), at most MaxOverlap.
func (s *Store) Rotate(name string, overlap time.Duration) (Key, string, error) {
	if overlap < 0 || overlap > MaxOverlap {
		return Key{}, "", Errorf(ErrInvalid, "an overlap is between 0 and %s, not %s", MaxOverlap, overlap)
	}
	token := newToken()
	var out Key
	err := s.core.modify(name, func(r *record, now time.Time) error {
		if overlap > 0 {
			r.Old = append(r.Old, oldToken{Hash: r.Hash, Until: now.Add(overlap)})
			if len(r.Old) > maxOld {
				r.Old = r.Old[len(r.Old)-maxOld:]
			}
		}
		sum := s.core.sec.sum(token)
		r.Hash, r.Rotated = sum[:], now
		out = r.view(Use{}, now)
		return nil
	})
	if err != nil {
		return Key{}, "", err
	}
	got, _ := s.Get(name)
	out.Use = got.Use
	return out, token, nil
}

// Revoke deletes a key: its tokens, old ones included, are refused from
// now on here, and by other front doors as soon as they see the change.
func (s *Store) Revoke(name string) error {
	return s.core.modify(name, nil)
}

// modify is one change of an existing record by edit (nil: delete it), as
// a compare-and-swap tried again when the record changed in between.
func (c *core) modify(name string, edit func(*record, time.Time) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	ctx := context.Background()
	for range 5 {
		cur, err := c.be.get(ctx, name)
		if err != nil {
			return c.failed(err)
		}
		if cur == nil {
			delete(c.recs, name) // revoked elsewhere meanwhile
			c.rebuild()
			return Errorf(ErrNotFound, "no key named %q is issued", name)
		}
		var r record
		if err := json.Unmarshal(cur, &r); err != nil {
			return fmt.Errorf("the issued key %s is not readable in the store: %v", name, err)
		}
		now := c.clock.Now().UTC()
		r = r.pruned(now)
		var next []byte
		if edit != nil {
			if err := edit(&r, now); err != nil {
				return err
			}
			if next, err = json.Marshal(r); err != nil {
				return err
			}
		}
		res, err := c.be.swap(ctx, name, cur, next, 0)
		if err != nil {
			return c.failed(err)
		}
		if res != swapped {
			continue // another front door changed it: again, on what it wrote
		}
		if edit == nil {
			delete(c.recs, name)
		} else {
			c.recs[name] = &r
		}
		c.rebuild()
		return nil
	}
	return Errorf(ErrUnavailable, "key %s changes too often to change it now; try again", name)
}

// writable makes sure a change may be made: the store answers, a secret
// is there (made now, at the first issue, when it is generated) and it is
// the one the store's keys were hashed with. Call with mu held.
func (c *core) writable() error {
	if c.be == nil {
		return Errorf(ErrUnavailable, "the issued keys' store is held by another process")
	}
	if c.stale {
		if err := c.load(); err != nil && c.stale {
			return c.failed(err)
		}
	}
	if c.mismatch != nil {
		return Errorf(ErrUnavailable, "%v", c.mismatch)
	}
	if c.sec == nil {
		sec, err := makeSecretFile(c.secPath)
		if err != nil {
			return Errorf(ErrUnavailable, "%v", err)
		}
		c.sec = sec
	}
	stored, err := c.be.setCheck(context.Background(), c.sec.check)
	if err != nil {
		return c.failed(err)
	}
	if !c.sec.matches(stored) {
		c.mismatch = fmt.Errorf("the issued keys were hashed with another secret than this gateway's (%s): every issued key is refused, and none can be issued, until that secret is restored", c.secretSays())
		c.rebuild()
		c.setHealth(c.mismatch)
		return Errorf(ErrUnavailable, "%v", c.mismatch)
	}
	if c.idx.Load().sec == nil {
		c.rebuild() // the secret was just made: the index can find tokens now
	}
	return nil
}

// failed marks the store failing and makes err an ErrUnavailable.
func (c *core) failed(err error) error {
	c.setHealth(err)
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return Errorf(ErrUnavailable, "%v", err)
}
