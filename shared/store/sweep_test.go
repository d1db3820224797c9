package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// fill writes n records k000… in state Pending and returns their revisions, in order.
func fill(t *testing.T, st *store.Store, n int) []uint64 {
	t.Helper()
	revs := make([]uint64, n)
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		rev, err := st.Put(context.Background(), key, store.Versioned{}, domain.Record{ResourceID: key, State: domain.StatePending, LastCommandSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = rev
	}
	return revs
}

// sweepKeys sweeps from a position and returns the keys in the order seen.
func sweepKeys(t *testing.T, st *store.Store, from uint64, keep func(string, uint64) bool, also func(store.Entry)) ([]string, store.SweepStats) {
	t.Helper()
	var keys []string
	stats, err := st.Sweep(context.Background(), from, keep, func(e store.Entry, derr error) error {
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
	revs := fill(t, st, 100)
	// A deleted key is not a record.
	kv, _ := env.JS.KeyValue(context.Background(), domain.Bucket)
	if err := kv.Delete(context.Background(), "k050"); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{0, revs[0], revs[37], revs[99], revs[99] + 50} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			keys, stats := sweepKeys(t, st, from, nil, nil)
			onceEach(t, keys, 99)
			if slices.Contains(keys, "k050") {
				t.Error("a deleted key was read")
			}
			if from == revs[37] && (keys[0] != "k037" || keys[len(keys)-1] != "k036") {
				t.Errorf("from k037's revision: first %s, last %s; want k037 first, wrapping around to k036", keys[0], keys[len(keys)-1])
			}
			if stats.Total != 100 || stats.Read != 100 {
				t.Errorf("stats %+v, want 100 messages (99 records and a delete marker), all read", stats)
			}
		})
	}
}

func TestSweep_ReadsOnlyItsShareYetCountsEverything(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	fill(t, st, 200)
	all := 0
	for s := range 4 {
		shard := domain.Shard{Index: s, Of: 4}
		keys, stats := sweepKeys(t, st, 0, func(key string, h uint64) bool {
			if h != domain.KeyHash(key) {
				t.Fatalf("%s: hash %x, want its KeyHash", key, h)
			}
			return shard.HoldsHash(h)
		}, nil)
		for _, k := range keys {
			if !shard.Holds(k) {
				t.Errorf("shard %d read %s of shard %d", s, k, domain.ShardOf(k, 4))
			}
		}
		onceEach(t, keys, len(keys))
		if stats.Read != 200 {
			t.Errorf("shard %d: read %d, want every message counted", s, stats.Read)
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
	revs := fill(t, st, 100)
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
	keys, _ := sweepKeys(t, st, revs[50], nil, func(e store.Entry) {
		states[e.Key] = e.Record.State
		if e.Key == "k060" {
			update("k055") // read already
			update("k070") // ahead in this part (or read ahead already)
			update("k010") // ahead, in the part before the start
			update("k010") // twice
		}
	})
	onceEach(t, keys, 100)
	// k070 may have been on its way already (the sweep reads ahead): either revision is right.
	if s := states["k070"]; s != domain.StatePending && s != domain.StatePlanned {
		t.Errorf("k070 read as %s", s)
	}
	for key, want := range map[string]domain.State{"k055": domain.StatePending, "k010": domain.StatePlanned} {
		if states[key] != want {
			t.Errorf("%s read as %s, want %s", key, states[key], want)
		}
	}
}

// A bucket that keeps history holds past revisions too: the sweep falls back to reading the
// last revision of each key.
func TestSweep_BucketWithHistoryReadsTheLastRevisions(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if _, err := env.JS.UpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: domain.Bucket, History: 5}); err != nil {
		t.Fatal(err)
	}
	st, _ := store.Open(ctx, env.JS)
	revs := fill(t, st, 20)
	for _, key := range []string{"k003", "k004"} {
		r, rev, _ := st.Get(ctx, key)
		next := r
		next.LastCommandSeq++
		if _, err := st.Put(ctx, key, store.Versioned{Record: r, Rev: rev}, next); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := sweepKeys(t, st, revs[10], nil, nil)
	onceEach(t, keys, 20)
}

// The callback's error ends the sweep with it, and a cancelled context ends it with the
// context's error; either way the callback is not called once Sweep has returned.
func TestSweep_StopsOnTheCallbacksErrorOrTheContext(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	fill(t, st, 300)
	errStop := errors.New("stop here")
	var calls atomic.Int64
	_, err := st.Sweep(context.Background(), 0, nil, func(store.Entry, error) error {
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
	_, err = st.Sweep(ctx, 0, nil, func(store.Entry, error) error {
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
	stream, err := env.JS.Stream(context.Background(), "KV_"+domain.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	keys, _ := sweepKeys(t, st, 0, nil, func(store.Entry) {
		if deleted > 0 {
			return
		}
		names := stream.ConsumerNames(context.Background())
		for name := range names.Name() {
			if err := stream.DeleteConsumer(context.Background(), name); err != nil {
				t.Errorf("delete consumer %s: %v", name, err)
			}
			deleted++
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
	_, err = own.Sweep(ctx, 0, nil, func(store.Entry, error) error {
		if calls++; calls == 10 {
			nc.Close()
		}
		return nil
	})
	if err == nil || ctx.Err() != nil || calls >= n {
		t.Errorf("connection closed: %v after %d calls and %v, want an error before the end and the deadline", err, calls, time.Since(start))
	}
}
