package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Deleted reports whether msg, of a bucket's stream, is the marker of a deleted or purged key
// rather than a value.
func Deleted(msg jetstream.Msg) bool { return msg.Headers().Get(domain.HeaderKVOperation) != "" }

// ScanLast calls fn for the last message of every subject of stream that filter matches, in
// one pass over the stream as it is when the scan starts (an ordered consumer delivering the
// last message per subject); fn's error stops it.
func ScanLast(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func(jetstream.Msg, uint64) error) error {
	return Read(ctx, js, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	}, 0, fn)
}

// Read reads stream through an ordered consumer of cfg until nothing is pending (or, with
// until > 0, up to stream sequence until), then deletes the consumer: passes every tick
// would otherwise leave one behind each until it expires.
func Read(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, until uint64, fn func(jetstream.Msg, uint64) error) error {
	cfg.InactiveThreshold = cmp.Or(cfg.InactiveThreshold, time.Minute)
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			_ = js.DeleteConsumer(context.WithoutCancel(ctx), stream, info.Name)
		}
	}()
	return Drain(ctx, cons, until, fn)
}

// Drain reads cons until nothing is pending (or, with until > 0, up to stream sequence until),
// without waiting for messages still to come; fn's error stops it.
//
// An empty answer while the consumer still counts messages pending (an ordered consumer being
// recreated, a reply that came before the messages) is not the end: the next fetch waits for
// them, a second at most each time.
func Drain(ctx context.Context, cons jetstream.Consumer, until uint64, fn func(jetstream.Msg, uint64) error) error {
	wait := false
	for ctx.Err() == nil {
		var batch jetstream.MessageBatch
		var err error
		if wait {
			batch, err = cons.Fetch(4096, jetstream.FetchMaxWait(time.Second))
		} else {
			batch, err = cons.FetchNoWait(4096)
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			if until > 0 && md.Sequence.Stream > until {
				return nil
			}
			if err := fn(m, md.Sequence.Stream); err != nil {
				return err
			}
			if md.NumPending == 0 || until > 0 && md.Sequence.Stream == until {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("read: %w", err)
		}
		if n == 0 {
			info, err := cons.Info(ctx)
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			if info.NumPending == 0 {
				return nil
			}
			wait = true
			continue
		}
		wait = false
	}
	return ctx.Err()
}
