// Package store keeps entity records in the JetStream key-value bucket, with optimistic
// concurrency, and reads the whole bucket in one streaming pass.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// ErrConflict is returned by Put when the record changed since it was read.
var ErrConflict = errors.New("record changed since it was read")

// ErrInvalidKey is returned for a key the bucket cannot hold (no entity has it).
var ErrInvalidKey = errors.New("not a valid entity key")

// Store is the bucket of records.
type Store struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// Open binds to the bucket, which provisioning created.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, domain.Bucket)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", domain.Bucket, err)
	}
	return &Store{js: js, kv: kv}, nil
}

// Get returns the record of key and its revision. An entity never seen gives a zero record in
// state None and revision 0.
func (s *Store) Get(ctx context.Context, key string) (domain.Record, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return domain.Record{State: domain.StateNone}, 0, nil
	}
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return domain.Record{}, 0, fmt.Errorf("get %q: %w", key, ErrInvalidKey)
	}
	if err != nil {
		return domain.Record{}, 0, fmt.Errorf("get %s: %w", key, err)
	}
	r, err := domain.DecodeRecord(e.Value())
	if err != nil {
		return domain.Record{}, 0, fmt.Errorf("get %s: %w: %w", key, ErrCorruptRecord, err)
	}
	return r, e.Revision(), nil
}

// ErrStale is returned by Put for a record that would move the entity backwards: written for
// a command stored before the one that wrote the record it replaces.
var ErrStale = errors.New("record would move backwards in the commands stream")

// Versioned is a record as read, with its revision (0: the key had no value).
type Versioned struct {
	Record domain.Record
	Rev    uint64
}

// Put writes next in place of prev, if the key still holds prev (it is still at prev.Rev), and
// returns the new revision. A concurrent change gives ErrConflict: re-read and re-apply. A
// next that does not follow prev in the commands stream (domain.Record.Follows) is refused
// with ErrStale before anything is written: with the revision check, the bucket never takes a
// write for a command older than the one its record holds, whoever sends it and however late
// it arrives.
func (s *Store) Put(ctx context.Context, key string, prev Versioned, next domain.Record) (uint64, error) {
	if prev.Rev != 0 && !next.Follows(prev.Record) {
		return 0, fmt.Errorf("put %s: command seq %d after %d: %w", key, next.LastCommandSeq, prev.Record.LastCommandSeq, ErrStale)
	}
	b, err := domain.EncodeRecord(next)
	if err != nil {
		return 0, err
	}
	var newRev uint64
	if prev.Rev == 0 {
		newRev, err = s.kv.Create(ctx, key, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("put %s: %w", key, ErrConflict)
		}
	} else {
		newRev, err = s.kv.Update(ctx, key, b, prev.Rev)
		// On a replicated bucket a racing write comes back as 10164, which ErrKeyExists misses;
		// ErrKeyRevisionMismatch matches both codes.
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("put %s: %w", key, ErrConflict)
		}
	}
	if errors.Is(err, jetstream.ErrInvalidKey) {
		return 0, fmt.Errorf("put %q: %w", key, ErrInvalidKey)
	}
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	return newRev, nil
}

// Entry is one record of a scan.
type Entry struct {
	Key string
	// Hash is domain.KeyHash(Key), set by Sweep.
	Hash     uint64
	Revision uint64
	// Stored is when the server stored this revision (set by Scan and Sweep): what is judged
	// of the record can be dated no earlier.
	Stored time.Time
	Record domain.Record
}

// ErrCorruptRecord is passed to a scan callback for a value that does not decode.
var ErrCorruptRecord = errors.New("corrupt record")

// Scan calls fn for every current record, in one streaming pass over the bucket as it is when
// the scan starts: an ordered consumer on the bucket's stream delivering the last value per
// key (not a Get per key, and without the watcher's small channel). A value that does not
// decode reaches fn with an error wrapping ErrCorruptRecord; fn's error stops the scan.
func (s *Store) Scan(ctx context.Context, fn func(Entry, error) error) error {
	info, err := s.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	if info.Values() == 0 {
		return nil
	}
	return ScanLast(ctx, s.js, kvStream, kvPrefix+">", func(msg jetstream.Msg, seq uint64) error {
		if Deleted(msg) {
			return nil
		}
		e := Entry{Key: strings.TrimPrefix(msg.Subject(), kvPrefix), Revision: seq}
		if md, err := msg.Metadata(); err == nil {
			e.Stored = md.Timestamp
		}
		var derr error
		if e.Record, derr = domain.DecodeRecord(msg.Data()); derr != nil {
			derr = fmt.Errorf("%w %s: %w", ErrCorruptRecord, e.Key, derr)
		}
		return fn(e, derr)
	})
}
