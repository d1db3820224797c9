package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// sender makes the messages of a run: unsigned (the zero sender), or signed by one admin key
// as integrators sign, issuedAt inside the body, so the function verifies every signature and
// remembers every signed command.
type sender struct {
	kp     nkeys.KeyPair
	policy *signing.Policy // for the replicas: signatures required, the key an admin's
	// gen makes the i-th command of a run over keys entities (nil: alwaysApplied).
	gen func(i, keys int, run string) domain.Command
}

func newSigner() (sender, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return sender{}, err
	}
	pub, _ := kp.PublicKey()
	p, err := signing.NewPolicy(true, []signing.Signer{{Name: "bench", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}})
	if err != nil {
		return sender{}, err
	}
	return sender{kp: kp, policy: p}, nil
}

// auth is what the replicas check commands with: nil for an unsigned run.
func (s sender) auth() command.Authority {
	if s.policy == nil {
		return nil
	}
	return s.policy
}

func (s sender) msg(c domain.Command) (*nats.Msg, error) {
	if s.kp == nil {
		return commandMsg(c), nil
	}
	c.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	m := commandMsg(c)
	return m, signing.Sign(s.kp, m.Data, m.Header)
}

func (s sender) name() string {
	if s.kp == nil {
		return "unsigned"
	}
	return "signed"
}

// throughputWith runs n commands over keys entities through 4 fresh replicas checking
// signatures as snd needs, and returns commands per second.
func throughputWith(ctx context.Context, srv *server, snd sender, n, keys int) (float64, error) {
	stop, err := startReplicas(ctx, srv.connect, 4, snd.auth())
	if err != nil {
		return 0, err
	}
	defer stop()
	return commandThroughput(ctx, srv.nc, n, keys, snd)
}

// signedCost is the cost of signed commands on one topology: the same load unsigned and
// signed against the same server, each the mean of two runs in the order unsigned, signed,
// signed, unsigned, so that a machine getting busier or quieter weighs on both alike.
type signedCost struct {
	unsigned, signed float64
	largest          int // bytes of the largest record after them
}

func (c signedCost) ratio() float64 { return c.signed / c.unsigned }

func compareSigned(ctx context.Context, srv *server, snd sender, n, keys int) (signedCost, error) {
	var c signedCost
	for _, s := range []sender{{}, snd, snd, {}} {
		tp, err := throughputWith(ctx, srv, s, n, keys)
		if err != nil {
			return c, fmt.Errorf("%s: %w", s.name(), err)
		}
		if s.kp == nil {
			c.unsigned += tp / 2
		} else {
			c.signed += tp / 2
		}
	}
	var err error
	c.largest, err = largestRecord(ctx, srv.js)
	return c, err
}

func (c signedCost) String() string {
	return fmt.Sprintf("unsigned %.0f commands/s, signed %.0f commands/s (%.2f); largest record %d bytes", c.unsigned, c.signed, c.ratio(), c.largest)
}

// benchSignedOnly is the -signed run: the unsynced, durable R1 and durable R3 command
// throughput, unsigned and signed, and nothing else.
func benchSignedOnly(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	snd, err := newSigner()
	if err != nil {
		return err
	}
	var costs []signedCost
	for _, t := range []struct {
		topology
		n    int
		name string
	}{
		{topology{replicas: 1}, s.throughputN, "unsynced R1"},
		{topology{replicas: 1, syncAlways: true}, s.durableN, "durable R1"},
		{topology{replicas: 3, syncAlways: true}, s.durableN, "durable R3"},
	} {
		c, err := signedOn(ctx, t.topology, snd, t.n, s.keys)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		fmt.Fprintf(out, "%s, 4 replicas, %d commands over %d entities: %v\n", t.name, t.n, s.keys, c)
		costs = append(costs, c)
	}
	fmt.Fprintf(out, "ratio signed_command %.2f\nratio signed_command_r1 %.2f\nratio signed_command_r3 %.2f\n", costs[0].ratio(), costs[1].ratio(), costs[2].ratio())
	return nil
}

func signedOn(ctx context.Context, t topology, snd sender, n, keys int) (signedCost, error) {
	srv, err := startServer(ctx, t)
	if err != nil {
		return signedCost{}, err
	}
	defer srv.stop()
	return compareSigned(ctx, srv, snd, n, keys)
}

// largestRecord is the size of the largest value in the bucket: what remembering signed
// commands adds to every write of an entity.
func largestRecord(ctx context.Context, js jetstream.JetStream) (int, error) {
	largest := 0
	for _, c := range domain.AllCells() {
		err := store.ScanLast(ctx, js, c.RecordsStream(), "$KV."+c.RecordsBucket()+".>", func(m jetstream.Msg, _ uint64) error {
			largest = max(largest, len(m.Data()))
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("largest record: %w", err)
		}
	}
	return largest, nil
}
