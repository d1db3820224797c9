package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// fill writes n records k000… in state Pending and returns their sweep positions, in order.
func fill(t *testing.T, st *store.Store, n int) []uint64 {
	t.Helper()
	pos := make([]uint64, n)
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		rev, err := st.Put(context.Background(), key, store.Versioned{}, domain.Record{ResourceID: key, State: domain.StatePending, LastCommandSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		pos[i] = store.Position(domain.CellOf(key), rev)
	}
	return pos
}

// sweepKeys sweeps from a position and returns the keys in the order seen.
func sweepKeys(t *testing.T, st *store.Store, from uint64, keep func(string, uint64) bool, also func(store.Entry)) ([]string, store.SweepStats) {
	t.Helper()
	var keys []string
	stats, err := st.Sweep(context.Background(), domain.AllCells(), from, keep, func(e store.Entry, derr error) error {
		if derr != nil {
			t.Errorf("%s: %v", e.Key, derr)
		}
		keys = append(keys, e.Key)
		if also != nil {
			also(e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, stats
}

func onceEach(t *testing.T, keys []string, want int) {
	t.Helper()
	seen := map[string]int{}
	for _, k := range keys {
		seen[k]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
	if len(seen) != want {
		t.Errorf("%d distinct keys, want %d", len(seen), want)
	}
}

func TestSweep_ReadsEveryRecordOnceFromAnyPositionWrappingAround(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	if keys, stats := sweepKeys(t, st, 0, nil, nil); len(keys) != 0 || stats.Total != 0 {
		t.Fatalf("empty bucket: %v, %+v", keys, stats)
	}
	pos := fill(t, st, 100)
	// A deleted key is not a record.
	kv, loc := testenv.RecordBucket(t, env.JS, "k050")
	if err := kv.Delete(context.Background(), loc); err != nil {
		t.Fatal(err)
	}
	// The key written last before k037 in its cell: the last a sweep from k037 reads.
	before37 := ""
	for i := 36; i >= 0 && before37 == ""; i-- {
		if k := fmt.Sprintf("k%03d", i); domain.CellOf(k) == domain.CellOf("k037") && k != "k050" {
			before37 = k
		}
	}
	for _, from := range []uint64{0, pos[0], pos[37], pos[99], pos[99] + 50} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			keys, stats := sweepKeys(t, st, from, nil, nil)
			onceEach(t, keys, 99)
			if slices.Contains(keys, "k050") {
				t.Error("a deleted key was read")
			}
			if from == pos[37] && (keys[0] != "k037" || before37 != "" && keys[len(keys)-1] != before37) {
				t.Errorf("from k037's position: first %s, last %s; want k037 first, wrapping around to %s", keys[0], keys[len(keys)-1], before37)
			}
			if stats.Total != 100 || stats.Read != 100 {
				t.Errorf("stats %+v, want 100 messages (99 records and a delete marker), all read", stats)
			}
		})
	}
}

func TestSweep_ReadsOnlyItsShareOfTheCells(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	fill(t, st, 200)
	all := 0
	for s := range 4 {
		shard := domain.Shard{Index: s, Of: 4}
		var keys []string
		stats, err := st.Sweep(context.Background(), shard.Cells(), 0, func(key string, h uint64) bool {
			if h != domain.KeyHash(key) {
				t.Fatalf("%s: hash %x, want its KeyHash", key, h)
			}
			return shard.HoldsHash(h)
		}, func(e store.Entry, _ error) error { keys = append(keys, e.Key); return nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !shard.Holds(k) {
				t.Errorf("shard %d read %s of shard %d", s, k, domain.ShardOf(k, 4))
			}
		}
		onceEach(t, keys, len(keys))
		if stats.Read != len(keys) {
			t.Errorf("shard %d: read %d messages for its %d records, want only its cells read", s, stats.Read, len(keys))
		}
		all += len(keys)
	}
	if all != 200 {
		t.Errorf("the shards read %d records in all, want 200", all)
	}
}

// A record written while the sweep runs is read once: as it was, if the sweep had passed it,
// or as it is now, if its earlier revision was replaced before the sweep got to it.
func TestSweep_RecordsWrittenDuringTheSweepAreReadOnce(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, _ := store.Open(ctx, env.JS)
	pos := fill(t, st, 100)
	update := func(key string) {
		r, rev, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		next := r
		next.State, next.LastCommandSeq = domain.StatePlanned, r.LastCommandSeq+1
		if _, err := st.Put(ctx, key, store.Versioned{Record: r, Rev: rev}, next); err != nil {
			t.Fatal(err)
		}
	}
	states := map[string]domain.State{}
	var read, ahead string // a key read already and one not yet, when k060 is read
	keys, _ := sweepKeys(t, st, pos[50], nil, func(e store.Entry) {
		states[e.Key] = e.Record.State
		if e.Key != "k060" {
			return
		}
		read = "k050"
		// Not read yet, and not on its way (the sweep reads ahead within a cell): in a cell
		// the sweep has not started.
		for i := range 100 {
			k := fmt.Sprintf("k%03d", i)
			if _, seen := states[k]; !seen && domain.CellOf(k) != domain.CellOf("k060") && domain.CellOf(k) != domain.CellOf("k050") {
				ahead = k
				break
			}
		}
		update(read)
		if ahead != "" {
			update(ahead)
			update(ahead) // twice
		}
	})
	onceEach(t, keys, 100)
	if ahead == "" {
		t.Fatal("no key left unread when k060 was read: the scenario did not happen")
	}
	for key, want := range map[string]domain.State{read: domain.StatePending, ahead: domain.StatePlanned} {
		if states[key] != want {
			t.Errorf("%s read as %s, want %s", key, states[key], want)
		}
	}
}

// The callback's error ends the sweep with it, and a cancelled context ends it with the
// context's error; either way the callback is not called once Sweep has returned.
func TestSweep_StopsOnTheCallbacksErrorOrTheContext(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	fill(t, st, 300)
	errStop := errors.New("stop here")
	var calls atomic.Int64
	_, err := st.Sweep(context.Background(), domain.AllCells(), 0, nil, func(store.Entry, error) error {
		if calls.Add(1) == 10 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls.Load() != 10 {
		t.Errorf("callback's error: %v after %d calls, want %v after 10", err, calls.Load(), errStop)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls.Store(0)
	_, err = st.Sweep(ctx, domain.AllCells(), 0, nil, func(store.Entry, error) error {
		if calls.Add(1) == 10 {
			cancel()
			time.Sleep(50 * time.Millisecond) // the sweep notices while this record is handled
		}
		return nil
	})
	after := calls.Load()
	time.Sleep(100 * time.Millisecond)
	if !errors.Is(err, context.Canceled) || after >= 300 {
		t.Errorf("cancelled: %v after %d calls, want the context's error before the end", err, after)
	}
	if calls.Load() != after {
		t.Errorf("the callback ran %d times after Sweep returned", calls.Load()-after)
	}
}

// The sweep's consumer deleted on the server mid-sweep: the sweep carries on with a new one
// and still reads every record once. Its connection closed mid-sweep: it ends with an error at
// once, not at its context's deadline.
func TestSweep_ConsumerLostOrConnectionClosed(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	const n = 10000 // more than a sweep's pull asks for at once: the rest comes after the loss
	testenv.FillRecords(t, env.JS, n, func(i int) string { return fmt.Sprintf("k%05d", i) })
	deleted := 0
	keys, _ := sweepKeys(t, st, 0, nil, func(store.Entry) {
		if deleted > 0 {
			return
		}
		for _, c := range domain.AllCells() {
			stream, err := env.JS.Stream(context.Background(), c.RecordsStream())
			if err != nil {
				t.Fatal(err)
			}
			names := stream.ConsumerNames(context.Background())
			for name := range names.Name() {
				if err := stream.DeleteConsumer(context.Background(), name); err != nil {
					t.Errorf("delete consumer %s: %v", name, err)
				}
				deleted++
			}
		}
	})
	if deleted == 0 {
		t.Fatal("no consumer to delete: the scenario did not happen")
	}
	onceEach(t, keys, n)

	nc := testenv.Connect(t, env.Server)
	own, _ := store.Open(context.Background(), testenv.JetStream(t, nc))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	calls, start := 0, time.Now()
	_, err := own.Sweep(ctx, domain.AllCells(), 0, nil, func(store.Entry, error) error {
		if calls++; calls == 10 {
			nc.Close()
		}
		return nil
	})
	if err == nil || ctx.Err() != nil || calls >= n {
		t.Errorf("connection closed: %v after %d calls and %v, want an error before the end and the deadline", err, calls, time.Since(start))
	}
}
