package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Compaction (README, A year at a million entities). A bucket that keeps one revision per key
// leaves an interior delete for every overwritten value until its first sequence moves past
// it, and one record never written since pins the first sequence for ever: after enough
// commands at any fleet size, a cell would pass nats-server's high-cardinality threshold of
// interior deletes, and a crashed node would rebuild it by reading every block. Compact
// rewrites a cell's oldest records, as they are, at the end of its stream (each by a
// compare-and-swap on its revision, so a command's write in between wins and the rewrite is
// dropped), which moves the first sequence past the deletes behind them: the interior
// deletes of a cell stay below its records.

// CompactStats says what a Compact did.
type CompactStats struct {
	Records, Deleted uint64 // the cell's records and interior deletes before
	Rewritten        int
}

// Compact rewrites up to limit of the cell's oldest records while the cell holds more
// interior deletes than records. A tombstone keeps what is left of its time to live.
func (s *Store) Compact(ctx context.Context, c domain.Cell, limit int) (CompactStats, error) {
	stream, err := s.js.Stream(ctx, c.RecordsStream())
	if err != nil {
		return CompactStats{}, fmt.Errorf("compact %s: %w", c.RecordsBucket(), err)
	}
	st := stream.CachedInfo().State
	cs := CompactStats{Records: st.Msgs}
	if st.LastSeq >= st.FirstSeq && st.Msgs > 0 {
		cs.Deleted = st.LastSeq - st.FirstSeq + 1 - st.Msgs
	}
	if cs.Deleted <= cs.Records || limit <= 0 {
		return cs, nil
	}
	last := st.LastSeq
	err = Read(ctx, s.js, c.RecordsStream(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}, last, func(msg jetstream.Msg, seq uint64) error {
		if cs.Rewritten >= limit {
			return errCompacted
		}
		if Deleted(msg) {
			return nil // a marker: it leaves by its own time to live
		}
		ok, err := s.rewrite(ctx, msg, seq)
		if ok {
			cs.Rewritten++
		}
		return err
	})
	if err != nil && !errors.Is(err, errCompacted) {
		return cs, fmt.Errorf("compact %s: %w", c.RecordsBucket(), err)
	}
	return cs, nil
}

var errCompacted = errors.New("compacted enough")

// rewrite publishes msg again on its subject if it is still the subject's last (seq); false
// when a newer write came first (nothing to do: the old one is gone already).
func (s *Store) rewrite(ctx context.Context, msg jetstream.Msg, seq uint64) (bool, error) {
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(seq)}
	if ttl := msg.Headers().Get(jetstream.MsgTTLHeader); ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil {
			return false, nil // not a time to live this package writes: left where it is
		}
		md, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		left := d - time.Since(md.Timestamp)
		if left < time.Second {
			return false, nil // about to leave anyway
		}
		opts = append(opts, jetstream.WithMsgTTL(left.Truncate(time.Second)))
	}
	_, err := s.js.Publish(ctx, msg.Subject(), msg.Data(), opts...)
	if WrongLastSequence(err) {
		return false, nil
	}
	return err == nil, err
}
