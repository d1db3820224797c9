package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// How the stores of a crash at a million are filled: directly, with what each applied command
// leaves (publishing millions of commands through the command function would take most of an
// hour on the development machine), in the order of commandOrder.

// fillOurs provisions the server and writes what 2n applied commands over n entities leave:
// each command in MAINT_COMMANDS, the record it wrote (one as after many commands) in its
// cell's bucket, its applied event in its cell's events stream. The partition consumers then
// start after the commands, as once the function has handled them.
func fillOurs(ctx context.Context, js jetstream.JetStream, n int) error {
	if _, err := provision.Run(ctx, js, provision.Config{Partitions: partitions}); err != nil {
		return err
	}
	now := time.Now().UTC()
	if err := publishOrdered(ctx, js, n, func(i, j int) ([]*nats.Msg, error) { return commandTrail(i, j, now) }); err != nil {
		return err
	}
	return skipHandled(ctx, js)
}

// commandTrail is what the j-th command, applied to entity i, leaves: the command, the record
// it wrote and its applied event.
func commandTrail(i, j int, now time.Time) ([]*nats.Msg, error) {
	seq := uint64(j + 1) // its sequence in MAINT_COMMANDS, empty before the fill
	r := fleetRecord(i, seq, now, true)
	id := fmt.Sprintf("%08x-5e1f-4c3a-9d7b-%012x", i, domain.RecentIDs+j) // unique: ids are de-duplicated
	r.Remember(id)
	r.LastCommandID, r.LastEvent.CommandID = id, id
	rec, err := domain.EncodeRecord(r)
	if err != nil {
		return nil, err
	}
	ev, err := domain.EncodeEvent(*r.LastEvent)
	if err != nil {
		return nil, err
	}
	key := domain.MustKey(r.ResourceID)
	record := nats.NewMsg(domain.RecordSubject(key))
	record.Data = rec
	event := function.EventMsg(domain.EventSubject(key), domain.OutcomeMsgID(id, seq), domain.OutcomeCEType(domain.OutcomeApplied), r.ResourceID, now, ev)
	c := domain.Command{ID: id, ResourceID: r.ResourceID, Task: domain.TaskPending, Actor: r.LastEvent.Actor}
	return []*nats.Msg{commandMsg(c), record, event}, nil
}

// skipHandled recreates the command partition consumers to start after the stored commands:
// the state of consumers that delivered and were acknowledged every one of them.
func skipHandled(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, domain.CommandsStream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	var cfgs []jetstream.ConsumerConfig
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		if strings.HasPrefix(ci.Name, domain.CommandConsumerPrefix) {
			cfgs = append(cfgs, ci.Config)
		}
	}
	if err := l.Err(); err != nil {
		return err
	}
	for _, cfg := range cfgs {
		if err := s.DeleteConsumer(ctx, cfg.Name); err != nil {
			return fmt.Errorf("consumer %s: %w", cfg.Name, err)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, info.State.LastSeq+1
		if _, err := s.CreateConsumer(ctx, cfg); err != nil {
			return fmt.Errorf("consumer %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// bareBucket is the bare server's one bucket.
const bareBucket = "bare"

// fillBare creates one History-1 bucket and puts, in the order of commandOrder, the value of
// the same size as our records under a key of the same length as theirs: n keys after 2n puts.
func fillBare(ctx context.Context, js jetstream.JetStream, n int) error {
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bareBucket, History: 1}); err != nil {
		return err
	}
	now := time.Now().UTC()
	return publishOrdered(ctx, js, n, func(i, j int) ([]*nats.Msg, error) {
		b, err := bareValue(i, j, now)
		m := nats.NewMsg("$KV." + bareBucket + "." + bareKey(i))
		m.Data = b
		return []*nats.Msg{m}, err
	})
}

func bareKey(i int) string { return domain.Located(domain.MustKey(entityID(i))) }

func bareValue(i, j int, now time.Time) ([]byte, error) {
	return domain.EncodeRecord(fleetRecord(i, uint64(j+1), now, true))
}

// restartBare fills a bare server, kills it, restarts it and times a get and a put; then stops
// it cleanly and times the next restart.
func restartBare(ctx context.Context, n int, out io.Writer) (kill, clean time.Duration, err error) {
	dir, err := os.MkdirTemp("", "maint-bench-bare-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	p, err := startServerProc(ctx, dir)
	if err != nil {
		return 0, 0, err
	}
	if err := fillThenKill(ctx, p, n, fillBare, out); err != nil {
		return 0, 0, err
	}
	if p, kill, err = bareRecovery(ctx, dir); err != nil {
		return 0, 0, err
	}
	if err := p.stop(); err != nil {
		return 0, 0, err
	}
	if p, clean, err = bareRecovery(ctx, dir); err != nil {
		return 0, 0, err
	}
	return kill, clean, p.stop()
}

// bareRecovery restarts the bare server on dir and times, from the restart, a get and a put.
func bareRecovery(ctx context.Context, dir string) (*serverProc, time.Duration, error) {
	start := time.Now()
	p, err := startServerProc(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	err = withConn(p.url, func(js jetstream.JetStream) error {
		kv, err := js.KeyValue(ctx, bareBucket)
		if err != nil {
			return err
		}
		e, err := kv.Get(ctx, bareKey(0))
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if _, err := kv.Put(ctx, bareKey(0), e.Value()); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		_ = p.kill()
		return nil, 0, err
	}
	return p, took, nil
}
