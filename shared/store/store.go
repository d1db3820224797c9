// Package store keeps entity records in the JetStream key-value bucket, with optimistic
// concurrency, and reads the whole bucket in one streaming pass.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// ErrConflict is returned by Put when the record changed since it was read.
var ErrConflict = errors.New("record changed since it was read")

// ErrInvalidKey is returned for a key the bucket cannot hold (no entity has it).
var ErrInvalidKey = errors.New("not a valid entity key")

// Store is the records: one bucket per cell of the layout (domain.Cells), each record under
// its located key (domain.Located) in the bucket of its cell.
type Store struct {
	js jetstream.JetStream
	// forgetAfter is how long a tombstone (a forgotten record) stays (SetForgetAfter).
	forgetAfter time.Duration

	mu  sync.Mutex
	kvs map[domain.Cell]jetstream.KeyValue // bound on a cell's first write
}

// Open returns the store of the buckets provisioning created. It asks the server nothing: a
// reader confined to a tenant may not look at a bucket's stream (its subjects are every
// tenant's keys), and reads by direct get (Get) or filtered consumers (Scan) only.
func Open(_ context.Context, js jetstream.JetStream) (*Store, error) {
	return &Store{js: js, kvs: map[domain.Cell]jetstream.KeyValue{}, forgetAfter: DefaultForgetAfter}, nil
}

// DefaultForgetAfter is how long a tombstone stays in the bucket by default.
const DefaultForgetAfter = 30 * 24 * time.Hour

// SetForgetAfter sets how long a tombstone stays (0: for ever): the record a Forget leaves
// is written with this time to live, after which the server removes it (its history stays in
// the events) and the entity reads as never seen. The bucket keeps the tracked fleet and the
// recent tombstones, not every entity ever forgotten.
func (s *Store) SetForgetAfter(d time.Duration) { s.forgetAfter = d }

// bucket binds the bucket of a cell, once.
func (s *Store) bucket(ctx context.Context, c domain.Cell) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kv, ok := s.kvs[c]; ok {
		return kv, nil
	}
	kv, err := s.js.KeyValue(ctx, c.RecordsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", c.RecordsBucket(), err)
	}
	s.kvs[c] = kv
	return kv, nil
}

// Get returns the record of key and its revision, as the bucket's leader has it (what a
// decision to write must be judged on). An entity never seen gives a zero record in state None
// and revision 0.
func (s *Store) Get(ctx context.Context, key string) (domain.Record, uint64, error) {
	return s.get(ctx, key, LeaderMsg)
}

// Peek is Get answered by any replica (a direct get, which may lag the last write by a
// moment): the read of a user confined to a tenant, whose permissions name the subject.
func (s *Store) Peek(ctx context.Context, key string) (domain.Record, uint64, error) {
	return s.get(ctx, key, LastMsg)
}

func (s *Store) get(ctx context.Context, key string, read func(context.Context, jetstream.JetStream, string, string) (*RawMsg, error)) (domain.Record, uint64, error) {
	if err := validKey(key); err != nil {
		return domain.Record{}, 0, fmt.Errorf("get %q: %w", key, err)
	}
	c := domain.CellOf(key)
	m, err := read(ctx, s.js, c.RecordsStream(), domain.RecordSubject(key))
	if errors.Is(err, ErrNoMessage) {
		return domain.Record{State: domain.StateNone}, 0, nil
	}
	if err != nil {
		return domain.Record{}, 0, fmt.Errorf("get %s: %w", key, err)
	}
	if DeletedHeader(m.Header) {
		return domain.Record{State: domain.StateNone}, 0, nil
	}
	r, err := domain.DecodeRecord(m.Data)
	if err != nil {
		return domain.Record{}, 0, fmt.Errorf("get %s: %w: %w", key, ErrCorruptRecord, err)
	}
	return r, m.Sequence, nil
}

// validKey checks that key is an entity key (what domain.Key makes): anything else could
// name another subject.
func validKey(key string) error {
	if key == "" || strings.ContainsAny(key, ".*> \t\r\n") {
		return ErrInvalidKey
	}
	if _, err := domain.DecodeKey(key); err != nil {
		return ErrInvalidKey
	}
	return nil
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
	if err := validKey(key); err != nil {
		return 0, fmt.Errorf("put %q: %w", key, err)
	}
	kv, err := s.bucket(ctx, domain.CellOf(key))
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	loc := domain.Located(key)
	if next.Forgotten() && s.forgetAfter > 0 && prev.Rev != 0 {
		return s.putTombstone(ctx, key, prev.Rev, b)
	}
	var opts []jetstream.KVCreateOpt
	if next.Forgotten() && s.forgetAfter > 0 {
		opts = append(opts, jetstream.KeyTTL(s.forgetAfter))
	}
	var newRev uint64
	if prev.Rev == 0 {
		newRev, err = kv.Create(ctx, loc, b, opts...)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("put %s: %w", key, ErrConflict)
		}
	} else {
		newRev, err = kv.Update(ctx, loc, b, prev.Rev)
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

// putTombstone replaces the record at rev with a tombstone that the server removes after
// forgetAfter (a KV update takes no time to live: a publish with its compare-and-swap does).
func (s *Store) putTombstone(ctx context.Context, key string, rev uint64, b []byte) (uint64, error) {
	ack, err := s.js.Publish(ctx, domain.RecordSubject(key), b,
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(s.forgetAfter))
	if WrongLastSequence(err) {
		return 0, fmt.Errorf("put %s: %w", key, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	return ack.Sequence, nil
}

// Entry is one record of a scan.
type Entry struct {
	Key string
	// Hash is domain.KeyHash(Key), set by Sweep.
	Hash uint64
	// Revision is the record's revision: its sequence in its cell's bucket.
	Revision uint64
	// Position is where a sweep met the record, to start the next sweep from (Sweep).
	Position uint64
	// Stored is when the server stored this revision (set by Scan and Sweep): what is judged
	// of the record can be dated no earlier.
	Stored time.Time
	Record domain.Record
}

// ErrCorruptRecord is passed to a scan callback for a value that does not decode.
var ErrCorruptRecord = errors.New("corrupt record")

// Scan calls fn for every current record, in one streaming pass over each cell's bucket as it
// is when the scan reaches it: an ordered consumer delivering the last value per key (not a
// Get per key, and without the watcher's small channel). With scopes, it reads only theirs,
// through consumers filtered on their tokens (what a user confined to them may create). A
// value that does not decode reaches fn with an error wrapping ErrCorruptRecord; fn's error
// stops the scan.
func (s *Store) Scan(ctx context.Context, fn func(Entry, error) error, scopes ...domain.Scope) error {
	filters := []string{">"}
	if len(scopes) > 0 {
		filters = filters[:0]
		for _, sc := range domain.Disjoint(scopes) {
			filters = append(filters, sc.Tokens())
		}
	}
	for _, c := range domain.AllCells() {
		prefix := "$KV." + c.RecordsBucket() + "."
		for _, f := range filters {
			err := ScanLast(ctx, s.js, c.RecordsStream(), prefix+f, func(msg jetstream.Msg, seq uint64) error {
				if Deleted(msg) {
					return nil
				}
				e := Entry{Key: domain.KeyFromSubject(msg.Subject()), Revision: seq}
				if md, err := msg.Metadata(); err == nil {
					e.Stored = md.Timestamp
				}
				var derr error
				if e.Record, derr = domain.DecodeRecord(msg.Data()); derr != nil {
					derr = fmt.Errorf("%w %s: %w", ErrCorruptRecord, e.Key, derr)
				}
				return fn(e, derr)
			})
			if err != nil {
				return fmt.Errorf("scan %s: %w", c.RecordsBucket(), err)
			}
		}
	}
	return nil
}
