package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// durable is what users run: every write synced to disk before it is acknowledged
// (sync_interval: always), on one node with single-replica streams (R1) and on a 3-node
// loopback cluster with replicated streams and bucket (R3). A replicated stream relaxes per-write
// syncing to syncing its Raft log (nats-server's SyncOnFlush), so the two differ; each ratio
// compares the command function with the raw limit of the same topology in the same run.
type durable struct {
	raw, command float64 // ops/s, commands/s
	p50, p99     time.Duration
	writes       float64 // synced writes (stored messages) per command
	signed       signedCost
}

func (d durable) ratio() float64 { return d.command / d.raw }

// benchDurable measures one topology: replicas is 1 (one embedded node) or 3 (three);
// webhooks provisions the webhook feed too (a copy of every outcome: one more write each);
// snd, unless zero, signs the same load once more.
func benchDurable(ctx context.Context, s sizes, replicas int, webhooks bool, snd sender, out io.Writer) (durable, error) {
	var d durable
	srv, err := startServer(ctx, topology{replicas: replicas, syncAlways: true, webhooks: webhooks})
	if err != nil {
		return d, err
	}
	defer srv.stop()
	if d.raw, err = rawGetUpdate(ctx, srv.js, 4, s.rawDuration, replicas); err != nil {
		return d, fmt.Errorf("raw: %w", err)
	}
	stop, err := startReplicas(ctx, srv.connect, 4, nil)
	if err != nil {
		return d, err
	}
	defer stop()
	before, err := storedMessages(ctx, srv.js)
	if err != nil {
		return d, err
	}
	n := s.durableN
	if d.command, err = commandThroughput(ctx, srv.nc, n, s.keys, sender{}); err != nil {
		return d, fmt.Errorf("throughput: %w", err)
	}
	after, err := storedMessages(ctx, srv.js)
	if err != nil {
		return d, err
	}
	d.writes = float64(after-before) / float64(n)
	// The latency is that of a steady 200/s: it starts once the followers have caught up with
	// the burst of the throughput run, whose catching up would otherwise land on its first
	// second (measured: a mean of 164 ms there, 20–50 ms after).
	if err := settled(ctx, srv.js, 10*time.Second); err != nil {
		return d, err
	}
	if d.p50, d.p99, err = commandLatency(ctx, srv.nc, s.durableRate, s.latencyFor, s.keys); err != nil {
		return d, fmt.Errorf("latency: %w", err)
	}
	stop()
	feed, signed := "", ""
	if webhooks {
		feed = " with the webhook feed"
	}
	if snd.kp != nil {
		if d.signed, err = compareSigned(ctx, srv, snd, n, s.keys); err != nil {
			return d, err
		}
		signed = fmt.Sprintf("; again, %v", d.signed)
	}
	fmt.Fprintf(out, "durable R%d%s (sync always): raw kv get+update, 4 workers: %.0f ops/s; command function: %.0f commands/s (%.2f of raw), %.1f stored messages per command; latency at %d/s: p50 %.1f ms, p99 %.1f ms%s\n",
		replicas, feed, d.raw, d.command, d.ratio(), d.writes, s.durableRate, ms(d.p50), ms(d.p99), signed)
	return d, nil
}

// storedMessages is how many messages every stream has stored so far (each one a synced
// write on a single-replica stream, an entry of a synced Raft log on a replicated one).
func storedMessages(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		n += info.State.LastSeq
	}
	return n, l.Err()
}

// settled waits, up to within, until every replica of every stream is current with its
// leader (no lag); on one node, at once.
func settled(ctx context.Context, js jetstream.JetStream, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		behind := 0
		l := js.ListStreams(ctx)
		for info := range l.Info() {
			if info.Cluster == nil {
				continue
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Lag > 0 {
					behind++
				}
			}
		}
		if err := l.Err(); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if behind == 0 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
