package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// A sweep reads the bucket like Scan, for the keys of a share (a shard), and may start
// anywhere: a run that could not finish starts the next one where it stopped, so that the
// records left out are not always the same. It relies on the bucket keeping one revision per
// key (History 1, as provisioned): the bucket's stream then holds exactly the current
// records, so reading it from any sequence and wrapping around reads each record once.

// SweepStats says how much of the bucket a sweep read.
type SweepStats struct {
	// Total is the messages of the bucket's stream when the sweep started (current records
	// and the markers of deleted keys); Read, how many of them the sweep read, of every key.
	Total, Read int
}

const kvStream = "KV_" + domain.Bucket

const kvPrefix = "$KV." + domain.Bucket + "."

// Sweep calls fn once for the current record of every key that keep accepts (nil: every key;
// it is given the key and its domain.KeyHash, which shards are made of),
// in one streaming pass over the bucket as it is when the sweep starts: from stream sequence
// from to the end, then from the start up to from (from 0 or out of range: from the start).
// Records of other keys are not decoded, and of the others only the summary
// (domain.DecodeRecordSummary: the state and its times, not the history). A record written
// during the sweep is seen once, as
// it was either when the sweep read it or after. A value that does not decode reaches fn with
// an error wrapping ErrCorruptRecord; fn's error stops the sweep. Entry.Revision is the
// record's stream sequence: a position to sweep from next time; Entry.Stored, when it was
// stored.
//
// On a bucket that keeps more than one revision per key, the sweep reads in Scan's order
// (from is ignored).
func (s *Store) Sweep(ctx context.Context, from uint64, keep func(key string, hash uint64) bool, fn func(Entry, error) error) (SweepStats, error) {
	stream, err := s.js.Stream(ctx, kvStream)
	if err != nil {
		return SweepStats{}, fmt.Errorf("sweep: %w", err)
	}
	info := stream.CachedInfo()
	st := SweepStats{Total: int(info.State.Msgs)}
	if info.State.Msgs == 0 {
		return st, nil
	}
	if info.Config.MaxMsgsPerSubject != 1 {
		err := s.Scan(ctx, func(e Entry, derr error) error {
			st.Read++
			e.Hash = domain.KeyHash(e.Key)
			if keep != nil && !keep(e.Key, e.Hash) {
				return nil
			}
			return fn(e, derr)
		})
		return st, err
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if from <= first || from > last {
		from = first
	}
	sw := &sweep{s: s, keep: keep, fn: fn, stats: &st}
	// From where the last run stopped to the end as it was, then the records before it.
	if err := sw.read(ctx, from, func(seq uint64) bool { return seq <= last }, false); err != nil {
		return st, err
	}
	if from > first {
		if err := sw.read(ctx, first, func(seq uint64) bool { return seq < from }, false); err != nil {
			return st, err
		}
	}
	// Records written since the start: those of keys already read were read as they were
	// then; the others' earlier revisions were replaced before the sweep reached them.
	slices.Sort(sw.seen)
	return st, sw.read(ctx, last+1, func(uint64) bool { return true }, true)
}

// sweep is one Sweep under way.
type sweep struct {
	s     *Store
	keep  func(string, uint64) bool
	fn    func(Entry, error) error
	stats *SweepStats
	seen  []uint64            // hashes of the keys read before the tail, sorted for the tail
	late  map[uint64]struct{} // hashes of the keys read in the tail
}

// read delivers the records from stream sequence start while within holds, or until the
// stream has nothing more. In the tail, it skips keys already read.
func (sw *sweep) read(ctx context.Context, start uint64, within func(uint64) bool, tail bool) error {
	cons, err := sw.s.js.OrderedConsumer(ctx, kvStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{kvPrefix + ">"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		return nil
	}
	// A callback rather than an iterator: the iterator's Next costs a timer and a select per
	// message, about a third of reading a record another share holds.
	h := &readHandler{ctx: ctx, sw: sw, within: within, tail: tail, done: make(chan error, 1)}
	cc, err := cons.Consume(h.handle, jetstream.PullMaxMessages(4096), jetstream.ConsumeErrHandler(h.failed))
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	select {
	case err = <-h.done:
	case <-ctx.Done():
		err = fmt.Errorf("sweep: %w", ctx.Err())
	}
	cc.Stop()
	h.stop() // waits for a message being handled: the sweep is the caller's again
	return err
}

// readHandler hands the messages of one read to the sweep until the read is over.
type readHandler struct {
	ctx    context.Context
	sw     *sweep
	within func(uint64) bool
	tail   bool
	done   chan error

	mu      sync.Mutex
	stopped bool
}

func (h *readHandler) handle(msg jetstream.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	if err := h.ctx.Err(); err != nil {
		h.finish(fmt.Errorf("sweep: %w", err))
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		h.finish(fmt.Errorf("sweep: %w", err))
		return
	}
	if !h.within(md.Sequence.Stream) {
		h.finish(nil)
		return
	}
	if !h.tail {
		h.sw.stats.Read++
	}
	if err := h.sw.deliver(msg, md, h.tail); err != nil {
		h.finish(err)
		return
	}
	if md.NumPending == 0 {
		h.finish(nil)
	}
}

// failed ends the read on an error the ordered consumer does not recover from by itself
// (it makes a new consumer after missed heartbeats, a gap or a deleted consumer).
func (h *readHandler) failed(_ jetstream.ConsumeContext, err error) {
	if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, jetstream.ErrOrderedConsumerReset) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.stopped {
			h.finish(fmt.Errorf("sweep: %w", err))
		}
	}
}

// finish ends the read with err (nil: read to its end); h.mu is held.
func (h *readHandler) finish(err error) {
	h.stopped = true
	h.done <- err
}

func (h *readHandler) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
}

// deliver hands one message to fn, unless it is a deleted key's marker, a key of another
// share, or (in the tail) a key already read.
func (sw *sweep) deliver(msg jetstream.Msg, md *jetstream.MsgMetadata, tail bool) error {
	if Deleted(msg) {
		return nil
	}
	key := strings.TrimPrefix(msg.Subject(), kvPrefix)
	h := domain.KeyHash(key)
	if sw.keep != nil && !sw.keep(key, h) {
		return nil
	}
	if tail {
		if _, found := slices.BinarySearch(sw.seen, h); found {
			return nil
		}
		if _, dup := sw.late[h]; dup {
			return nil
		}
		if sw.late == nil {
			sw.late = map[uint64]struct{}{}
		}
		sw.late[h] = struct{}{}
	} else {
		sw.seen = append(sw.seen, h)
	}
	e := Entry{Key: key, Hash: h, Revision: md.Sequence.Stream, Stored: md.Timestamp}
	var derr error
	if e.Record, derr = domain.DecodeRecordSummary(msg.Data()); derr != nil {
		derr = fmt.Errorf("%w %s: %w", ErrCorruptRecord, key, derr)
	}
	return sw.fn(e, derr)
}
