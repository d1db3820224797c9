package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

func TestPut_WritesOnlyAtTheRevisionItRead(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, err := store.Open(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	r, rev, err := st.Get(ctx, "k1")
	if err != nil || rev != 0 || r.State != domain.StateNone {
		t.Fatalf("never-seen entity: %+v rev %d err %v, want None at revision 0", r, rev, err)
	}
	r.State, r.LastCommandSeq = domain.StatePending, 1
	rev1, err := st.Put(ctx, "k1", store.Versioned{}, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "k1", store.Versioned{}, r); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	prev := store.Versioned{Record: r, Rev: rev1}
	r.State, r.LastCommandSeq = domain.StatePlanned, 2
	rev2, err := st.Put(ctx, "k1", prev, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "k1", prev, r); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at a stale revision: %v, want ErrConflict", err)
	}
	got, rev, err := st.Get(ctx, "k1")
	if err != nil || rev != rev2 || got.State != domain.StatePlanned {
		t.Fatalf("read back %+v rev %d (%v)", got, rev, err)
	}
}

func TestScan_ReadsEveryCurrentRecordOnce(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, _ := store.Open(ctx, env.JS)
	if err := st.Scan(ctx, func(store.Entry, error) error { t.Fatal("callback on an empty bucket"); return nil }); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%03d", i)
		first := domain.Record{ResourceID: key, State: domain.StatePending, LastCommandSeq: 1}
		rev, err := st.Put(ctx, key, store.Versioned{}, first)
		if err != nil {
			t.Fatal(err)
		}
		// A second version: the scan must see only the last.
		if _, err := st.Put(ctx, key, store.Versioned{Record: first, Rev: rev}, domain.Record{ResourceID: key, State: domain.StatePlanned, LastCommandSeq: 2}); err != nil {
			t.Fatal(err)
		}
	}
	kv, loc := testenv.RecordBucket(t, env.JS, "k000")
	if err := kv.Delete(ctx, loc); err != nil {
		t.Fatal(err)
	}
	testenv.PutRawRecord(t, env.JS, "corrupt", []byte("{not json"))
	seen := map[string]int{}
	var corrupt []string
	err := st.Scan(ctx, func(e store.Entry, err error) error {
		if err != nil {
			if !errors.Is(err, store.ErrCorruptRecord) {
				t.Errorf("scan error %v", err)
			}
			corrupt = append(corrupt, e.Key)
			return nil
		}
		seen[e.Key]++
		if e.Record.State != domain.StatePlanned {
			t.Errorf("%s: %s, want the last version", e.Key, e.Record.State)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n-1 || seen["k000"] != 0 {
		t.Fatalf("scan saw %d records (deleted one seen %d times), want %d", len(seen), seen["k000"], n-1)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s seen %d times", k, c)
		}
	}
	if len(corrupt) != 1 || corrupt[0] != "corrupt" {
		t.Fatalf("corrupt records reported: %v", corrupt)
	}
	stop := errors.New("stop")
	calls := 0
	if err := st.Scan(ctx, func(store.Entry, error) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("callback error: %v after %d calls, want it returned after 1", err, calls)
	}
}

// TestPut_RefusesARecordThatMovesBackwards: a write for a command stored before the one that
// wrote the current record is refused by the store itself, even at the right revision, and
// nothing is written; a recreated commands stream (lower sequence, later stored time) is not.
func TestPut_RefusesARecordThatMovesBackwards(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, err := store.Open(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cur := domain.Record{ResourceID: "k", State: domain.StatePlanned, LastCommandSeq: 40, LastCommandAt: t0}
	rev, err := st.Put(ctx, "k", store.Versioned{}, cur)
	if err != nil {
		t.Fatal(err)
	}
	held := store.Versioned{Record: cur, Rev: rev}
	for _, tc := range []struct {
		name string
		seq  uint64
		at   time.Time
	}{
		{"older command", 39, t0.Add(-time.Second)},
		{"the same command again", 40, t0},
		{"older sequence, same stored time", 12, t0},
	} {
		next := cur
		next.State, next.LastCommandSeq, next.LastCommandAt = domain.StateNone, tc.seq, tc.at
		if _, err := st.Put(ctx, "k", held, next); !errors.Is(err, store.ErrStale) {
			t.Errorf("%s: %v, want ErrStale", tc.name, err)
		}
	}
	if got, r, _ := st.Get(ctx, "k"); r != rev || got.State != domain.StatePlanned {
		t.Fatalf("a refused write changed the record: %+v at %d", got, r)
	}
	recreated := cur
	recreated.State, recreated.LastCommandSeq, recreated.LastCommandAt = domain.StateNone, 3, t0.Add(time.Minute)
	if _, err := st.Put(ctx, "k", held, recreated); err != nil {
		t.Fatalf("command of a recreated stream: %v", err)
	}
}

// TestStore_InvalidKeyIsTheStoresOwnError: a key the bucket cannot hold comes back as
// store.ErrInvalidKey, on a read and on a write, and no JetStream error reaches the caller.
func TestStore_InvalidKeyIsTheStoresOwnError(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, err := store.Open(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "bad key*"); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("get: %v, want ErrInvalidKey", err)
	}
	if _, err := st.Put(ctx, "bad key*", store.Versioned{}, domain.Record{LastCommandSeq: 1}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("put: %v, want ErrInvalidKey", err)
	}
}
