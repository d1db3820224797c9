package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// migrateRecords moves the records of the first layout (one bucket, domain.Bucket, keyed by
// the entity key) into the cells (domain.Cells buckets, keyed by the located key), then
// removes the old bucket. Run with the functions stopped (README, Upgrading). It can stop
// anywhere and run again: a record the cell already holds is left as it is (written there
// since, it is the newer), and the old bucket goes only once every record is in a cell.
// A record's revision is its new sequence in its cell.
func migrateRecords(ctx context.Context, js jetstream.JetStream) Change {
	const old = "KV_" + domain.Bucket
	ch := Change{Kind: "migrate", Name: domain.Bucket + " -> cells"}
	s, err := js.Stream(ctx, old)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		ch.Action = Unchanged
		return ch
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	kvs := map[domain.Cell]jetstream.KeyValue{}
	for _, c := range domain.AllCells() {
		if kvs[c], err = js.KeyValue(ctx, c.RecordsBucket()); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
	}
	moved, kept := 0, 0
	if s.CachedInfo().State.Msgs > 0 {
		prefix := "$KV." + domain.Bucket + "."
		err = store.ScanLast(ctx, js, old, prefix+">", func(msg jetstream.Msg, _ uint64) error {
			if store.Deleted(msg) {
				return nil
			}
			key := strings.TrimPrefix(msg.Subject(), prefix)
			if _, err := domain.DecodeKey(key); err != nil {
				return fmt.Errorf("record %q is not under an entity key: %w", key, err)
			}
			_, err := kvs[domain.CellOf(key)].Create(ctx, domain.Located(key), msg.Data())
			switch {
			case errors.Is(err, jetstream.ErrKeyExists):
				kept++
			case err != nil:
				return fmt.Errorf("move %s: %w", key, err)
			default:
				moved++
			}
			return nil
		})
		if err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
	}
	if err := js.DeleteStream(ctx, old); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		ch.Action, ch.Err = Failed, fmt.Errorf("remove the old bucket after moving its records: %w", err)
		return ch
	}
	ch.Action = Updated
	ch.Fields = []string{fmt.Sprintf("%d records moved", moved)}
	if kept > 0 {
		ch.Fields = append(ch.Fields, fmt.Sprintf("%d already there", kept))
	}
	return ch
}
