package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
	r.State = domain.StatePending
	rev1, err := st.Put(ctx, "k1", r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "k1", r, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	r.State = domain.StatePlanned
	rev2, err := st.Put(ctx, "k1", r, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "k1", r, rev1); !errors.Is(err, store.ErrConflict) {
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
		rev, err := st.Put(ctx, key, domain.Record{ResourceID: key, State: domain.StatePending}, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A second version: the scan must see only the last.
		if _, err := st.Put(ctx, key, domain.Record{ResourceID: key, State: domain.StatePlanned}, rev); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := env.JS.KeyValue(ctx, domain.Bucket)
	if err := kv.Delete(ctx, "k000"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "corrupt", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
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
