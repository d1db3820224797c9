package store_test

import (
	"context"
	"fmt"
	"testing"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// Records written once pin a cell's first sequence while others are overwritten again and
// again: the interior deletes grow past the records. Compact rewrites the oldest records, as
// they are, and brings the deletes below the records; a record written meanwhile keeps its
// own write.
func TestCompact_KeepsInteriorDeletesBelowTheRecords(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st, _ := store.Open(ctx, env.JS)
	cell := domain.Cell(3)
	var keys []string
	for i := 0; len(keys) < 40; i++ {
		if k := fmt.Sprintf("k%04d", i); domain.CellOf(k) == cell {
			keys = append(keys, k)
		}
	}
	revs := map[string]uint64{}
	recs := map[string]domain.Record{}
	put := func(k string, seq uint64) {
		r := domain.Record{ResourceID: "/" + k, State: domain.StatePending, LastCommandSeq: seq, LastCommandID: fmt.Sprintf("c-%d", seq)}
		rev, err := st.Put(ctx, k, store.Versioned{Record: recs[k], Rev: revs[k]}, r)
		if err != nil {
			t.Fatal(err)
		}
		revs[k], recs[k] = rev, r
	}
	for _, k := range keys {
		put(k, 1)
	}
	// The last ten, over and over: 300 deletes behind the first thirty, which never change.
	for n := uint64(2); n < 32; n++ {
		for _, k := range keys[30:] {
			put(k, n)
		}
	}
	before, err := st.Compact(ctx, cell, 0)
	if err != nil || before.Records != 40 || before.Deleted != 300 || before.Rewritten != 0 {
		t.Fatalf("before: %+v, %v; want 40 records, 300 deletes, nothing rewritten with no room", before, err)
	}
	if cs, err := st.Compact(ctx, cell, 1000); err != nil || cs.Rewritten == 0 {
		t.Fatalf("compact: %+v, %v", cs, err)
	}
	after, err := st.Compact(ctx, cell, 0)
	if err != nil || after.Records != 40 || after.Deleted > after.Records {
		t.Errorf("after: %+v, %v; want the 40 records and fewer deletes than records", after, err)
	}
	for _, k := range keys {
		got, _, err := st.Get(ctx, k)
		if err != nil || got.LastCommandID != recs[k].LastCommandID {
			t.Errorf("%s after compaction: %+v, %v; want %+v", k, got, err, recs[k])
		}
	}
}
