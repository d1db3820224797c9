package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/store"
)

// change is one value of a bucket as the watch reads it.
type change struct {
	key     string
	rev     uint64
	at      time.Time // when the bucket stored it
	value   []byte
	deleted bool
}

// maxBatch bounds the changes applied under one lock while the bucket is first read.
const maxBatch = 1024

// follower reads a KV bucket live: the last value of every key, then every change, in one
// ordered consumer on the bucket's stream (a pull consumer: the reader role may create it, and
// nothing has to answer flow control; without the KV watcher's small channel). A bucket that
// does not exist yet is waited for.
type follower struct {
	js     jetstream.JetStream
	bucket string
	// key turns a key of the bucket into the key the view keeps (nil: as it is).
	key func(string) string
	log *slog.Logger
	// retry is how long to wait before looking for a missing bucket again, or after an error.
	retry time.Duration
	// reset is called before the bucket is read from the start (again); apply with each batch
	// of changes; caughtUp once the values stored when the read started are applied.
	reset    func()
	apply    func([]change)
	caughtUp func()
	// present, when set, is told whether the bucket exists.
	present func(bool)
	// read says that the bucket was read once (caughtUp was called, or it was found absent).
	read atomic.Bool
}

// caught marks the bucket read and calls caughtUp.
func (f *follower) caught() {
	f.read.Store(true)
	f.caughtUp()
}

func (f *follower) tell(exists bool) {
	if f.present != nil {
		f.present(exists)
	}
}

// run follows the bucket until ctx ends.
func (f *follower) run(ctx context.Context) {
	missing := false
	for ctx.Err() == nil {
		err := f.once(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound):
			if !missing {
				f.log.Info("bucket not there yet; looking again", "bucket", f.bucket, "every", f.retry)
				missing = true
				f.tell(false)
				f.reset()
				f.caught() // an absent bucket is read: it has nothing
			}
		default:
			missing = false
			f.log.Warn("reading the bucket stopped; reading it again", "bucket", f.bucket, "error", err, "retry_in", f.retry)
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.retry):
		}
	}
}

// once reads the bucket from the start and follows it until an error.
func (f *follower) once(ctx context.Context) error {
	stream := "KV_" + f.bucket
	s, err := f.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	prefix := "$KV." + f.bucket + "."
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", f.bucket, err)
	}
	f.tell(true)
	f.reset()
	pending := true
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		pending = false
		f.caught()
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("follow %s: %w", f.bucket, err)
	}
	defer it.Stop()
	batch := make([]change, 0, maxBatch)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("follow %s: %w", f.bucket, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("follow %s: %w", f.bucket, err)
		}
		c := change{key: strings.TrimPrefix(msg.Subject(), prefix), rev: md.Sequence.Stream, at: md.Timestamp}
		if f.key != nil {
			c.key = f.key(c.key)
		}
		if store.Deleted(msg) {
			c.deleted = true
		} else {
			c.value = msg.Data()
		}
		batch = append(batch, c)
		if md.NumPending == 0 || len(batch) == maxBatch {
			f.apply(batch)
			batch = batch[:0]
		}
		if pending && md.NumPending == 0 {
			pending = false
			f.caught()
		}
	}
}
