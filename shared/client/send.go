package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Result is what became of a sent command.
type Result struct {
	Command domain.Command
	// Seq is the command's sequence in MAINT_COMMANDS.
	Seq uint64
	// Republished is true when the stream already held a command with this id (published
	// again inside the duplicate window): nothing new was stored.
	Republished bool
	// Event is the command's outcome event.
	Event domain.Event
	// Entity is the record as read right after the outcome event (the event is published
	// after the record is written, so it includes the command's effect, and maybe later ones).
	Entity Entity
	// Tracks is true when the entity was not tracked before the command (never seen, or
	// forgotten) and the command put it in the signal: from the next tick it is exported to
	// the health system. A person who mistyped a resource ID learns it here.
	Tracks bool
}

// ErrInvalidCommand is wrapped when a command fails the checks of the messaging contract (README) before it is sent.
var ErrInvalidCommand = errors.New("invalid command (not sent)")

// ErrIDInUse is returned when a command id was already used for another entity.
var ErrIDInUse = errors.New("command id already in use")

// storedKey is the entity key of the command stored at seq in the commands stream.
func (c *Client) storedKey(ctx context.Context, seq uint64) (string, error) {
	s, err := c.JS.Stream(ctx, domain.CommandsStream)
	if err != nil {
		return "", err
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return "", err
	}
	return domain.KeyFromSubject(m.Subject), nil
}

// ErrNoOutcome is wrapped when no outcome event arrives before the context ends.
var ErrNoOutcome = errors.New("no outcome event")

// OutcomeError is returned with the Result when the command was rejected or dead-lettered.
type OutcomeError struct {
	Event domain.Event
}

func (e *OutcomeError) Error() string {
	ev := e.Event
	return describeOutcome(fmt.Sprintf("command %s (%s) %s", ev.CommandID, ev.Task, ev.Outcome), ev.Code, ev.Target, ev.Message)
}

// describeOutcome is an outcome's head followed by its error code, target and message, those
// it has.
func describeOutcome(head string, code domain.Code, target, message string) string {
	s := head
	if code != "" {
		s += ": " + string(code)
	}
	if target != "" {
		s += " (target " + target + ")"
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// Failed reports whether an outcome is a failure (rejected or dead-lettered).
func Failed(o domain.Outcome) bool {
	return o == domain.OutcomeRejected || o == domain.OutcomeDeadLettered
}

// Send publishes cmd to maint.cmd.<key> with Nats-Msg-Id = cmd.ID and waits, until ctx ends,
// for the outcome event of that very command on maint.evt.<key>. It checks the command first
// (ErrInvalidCommand). A rejected or dead-lettered command returns the Result and an
// *OutcomeError; no outcome in time returns the Result so far and an error wrapping
// ErrNoOutcome (the command is stored and takes effect when a command function runs). When the
// server does not let this user publish the command or read its outcome, a client of Connect
// or FromConn fails at once with a *natsconn.PermissionError (errors.Is
// natsconn.ErrPermissionDenied) instead of waiting for ctx.
func (c *Client) Send(ctx context.Context, cmd domain.Command) (*Result, error) {
	msg, key, err := c.commandMsg(cmd)
	if err != nil {
		return nil, err
	}
	// Whether the entity was tracked before, at best: a read that fails says nothing.
	before, err := c.Get(ctx, cmd.ResourceID)
	untracked := err == nil && !before.Tracked()
	var res *Result
	err = c.publishAwaiting(ctx, awaitedCommand(cmd.ID, domain.EventSubject(key)), msg, func(ctx context.Context, sub *nats.Subscription, ack *jetstream.PubAck) error {
		var err error
		res, err = c.send(ctx, cmd, sub, ack, key, untracked)
		return err
	})
	if errors.As(err, new(*natsconn.PermissionError)) {
		return nil, err
	}
	return res, err
}

// awaited is a command publishAwaiting publishes: what it is and its id, for errors, the
// subject of its outcomes, and what those are called in errors.
type awaited struct {
	what, id string
	outcomes string
	events   string
}

// awaitedCommand is an entity's or a policy's command of id, its outcomes on outcomes.
func awaitedCommand(id, outcomes string) awaited {
	return awaited{what: "command", id: id, outcomes: outcomes, events: "outcome events"}
}

// publishAwaiting publishes the command msg (a) once a subscription to its outcomes' subject is
// in place at the server, so that the outcome cannot slip past, and hands the subscription
// and the stream's ack to await. A permission refusal of the publish or of the subscription
// (it comes asynchronously) ends it at once with a *natsconn.PermissionError. Entity, policy
// and campaign commands are all sent this way.
func (c *Client) publishAwaiting(ctx context.Context, a awaited, msg *nats.Msg, await func(context.Context, *nats.Subscription, *jetstream.PubAck) error) error {
	err := c.Guard(ctx, a.outcomes, func(ctx context.Context) error {
		sub, err := c.NC.SubscribeSync(a.outcomes)
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", a.events, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := c.NC.FlushWithContext(ctx); err != nil {
			return fmt.Errorf("subscribe to %s: %w", a.events, err)
		}
		ack, err := c.pub.PublishMsg(ctx, msg)
		if err != nil {
			return fmt.Errorf("publish %s %s: %w", a.what, a.id, notProvisioned(err))
		}
		c.log.Debug(a.what+" stored", "command_id", a.id, "subject", msg.Subject, "seq", ack.Sequence, "duplicate", ack.Duplicate)
		return await(ctx, sub, ack)
	})
	if pe, ok := err.(*natsconn.PermissionError); ok {
		// The guard ended the call: its error names the refused subject, not the command.
		return fmt.Errorf("%s %s: %w", a.what, a.id, pe)
	}
	return err
}

func (c *Client) send(ctx context.Context, cmd domain.Command, sub *nats.Subscription, ack *jetstream.PubAck, key string, untracked bool) (*Result, error) {
	res := &Result{Command: cmd, Seq: ack.Sequence, Republished: ack.Duplicate}
	var err error
	found := false
	if ack.Duplicate {
		if res.Event, found, err = c.earlierOutcome(ctx, cmd, key, ack.Sequence); err != nil {
			return res, err
		}
	}
	if !found {
		if res.Event, err = c.awaitOutcome(ctx, sub, cmd); err != nil {
			if ctx.Err() != nil {
				return res, c.noOutcome(ctx, cmd, res)
			}
			return res, fmt.Errorf("wait for outcome of %s: %w", cmd.ID, err)
		}
	}

	// The outcome is in; the record read does not need the command's deadline to be left.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.awaitStored(rctx, key, res.Event)
	ent, err := c.Get(rctx, cmd.ResourceID)
	if err != nil {
		return res, fmt.Errorf("command %s %s, but reading the record failed: %w", cmd.ID, res.Event.Outcome, err)
	}
	res.Entity = ent
	res.Tracks = untracked && res.Event.Outcome == domain.OutcomeApplied && ent.Tracked()
	if Failed(res.Event.Outcome) {
		return res, &OutcomeError{Event: res.Event}
	}
	return res, nil
}

// earlierOutcome looks up the outcome of a command the stream had already (a duplicate id,
// stored at seq): it may have been published before the caller subscribed. An id stored for
// another entity gets no outcome here ever: that fails at once rather than at the timeout.
func (c *Client) earlierOutcome(ctx context.Context, cmd domain.Command, key string, seq uint64) (domain.Event, bool, error) {
	if other, err := c.storedKey(ctx, seq); err == nil && other != key {
		return domain.Event{}, false, fmt.Errorf("%w: %s was sent for another entity (key %s) less than the duplicate window ago; send with a fresh id", ErrIDInUse, cmd.ID, other)
	}
	evs, err := c.History(ctx, cmd.ResourceID)
	if err != nil {
		return domain.Event{}, false, nil // the subscription covers an outcome still to come
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].CommandID == cmd.ID {
			return evs[i], true, nil
		}
	}
	return domain.Event{}, false, nil
}

// awaitOutcome waits on sub for the outcome event of cmd.
func (c *Client) awaitOutcome(ctx context.Context, sub *nats.Subscription, cmd domain.Command) (domain.Event, error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return domain.Event{}, err
		}
		ev, err := domain.DecodeEvent(m.Data)
		if err != nil {
			c.log.Warn("ignoring an outcome event that does not decode", "subject", m.Subject, "error", err)
			continue
		}
		if ev.CommandID == cmd.ID {
			return ev, nil
		}
	}
}

// awaitStored waits, briefly and at best, until the events stream has stored ev: the outcome
// reaches a subscriber on the wire a moment before the stream has it, and a history read right
// after the command must include it.
func (c *Client) awaitStored(ctx context.Context, key string, ev domain.Event) {
	for ctx.Err() == nil {
		m, err := store.LeaderMsg(ctx, c.JS, domain.EventStreamOf(key), domain.EventSubject(key))
		if err != nil && !errors.Is(err, store.ErrNoMessage) {
			return // not readable here: do not hold the caller up
		}
		if err == nil {
			if last, derr := domain.DecodeEvent(m.Data); derr != nil || last.CommandSeq >= ev.CommandSeq {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Client) noOutcome(ctx context.Context, cmd domain.Command, res *Result) error {
	why := "interrupted"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out"
	}
	return fmt.Errorf("%w for command %s (%s) on %s: %s waiting; the command is stored in %s (sequence %d) and takes effect when a command function runs",
		ErrNoOutcome, cmd.ID, cmd.Task, cmd.ResourceID, why, domain.CommandsStream, res.Seq)
}

// PublishOnly stores a command without waiting for its outcome and returns its stream
// sequence and whether the stream already held the id. A subject this user may not publish to
// fails at once, as in Send.
func (c *Client) PublishOnly(ctx context.Context, cmd domain.Command) (uint64, bool, error) {
	msg, _, err := c.commandMsg(cmd)
	if err != nil {
		return 0, false, err
	}
	ack, err := c.pub.PublishMsg(ctx, msg)
	if err != nil {
		return 0, false, fmt.Errorf("publish command %s: %w", cmd.ID, notProvisioned(err))
	}
	return ack.Sequence, ack.Duplicate, nil
}

// commandMsg checks cmd and builds the message an integrator would publish: the JSON body on
// maint.cmd.<key>, the id as Nats-Msg-Id, and a signature when the client has a key.
func (c *Client) commandMsg(cmd domain.Command) (*nats.Msg, string, error) {
	key, err := domain.Key(cmd.ResourceID)
	if err != nil {
		return nil, "", fmt.Errorf("%w: resourceId: %w", ErrInvalidCommand, err)
	}
	if c.signer != nil && cmd.IssuedAt == "" {
		// Inside the signed body: the command function refuses it once it is too old, and
		// any copy issued no later than the last one applied with this key.
		cmd.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	if rej := cmd.Validate(key, cmd.ID); rej != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidCommand, rej)
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, "", err
	}
	if len(body) > domain.MaxCommandBytes {
		return nil, "", fmt.Errorf("%w: body is %d bytes, at most %d", ErrInvalidCommand, len(body), domain.MaxCommandBytes)
	}
	msg, err := signing.Msg(c.signer, domain.CommandSubject(key), cmd.ID, body)
	if err != nil {
		return nil, "", err
	}
	return msg, key, nil
}
