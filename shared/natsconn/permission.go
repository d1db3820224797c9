package natsconn

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrPermissionDenied matches every *PermissionError (errors.Is).
var ErrPermissionDenied = errors.New("permission denied")

// PermissionError is the server refusing this user a publish or a subscription.
type PermissionError struct {
	// Op is "publish" or "subscribe".
	Op string
	// Subject is the refused subject as the server reported it.
	Subject string
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("permission denied: the NATS server does not allow this user to %s to %q", e.Op, e.Subject)
}

// Is makes errors.Is(err, ErrPermissionDenied) hold.
func (e *PermissionError) Is(target error) bool { return target == ErrPermissionDenied }

// Unwrap makes errors.Is(err, nats.ErrPermissionViolation) hold too.
func (e *PermissionError) Unwrap() error { return nats.ErrPermissionViolation }

// The server's texts (nats-server client.go): `Permissions Violation for Publish to "x"` and
// `... for Subscription to "x"`, maybe followed by `using queue "q"`.
var violationRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

// parseViolation turns an asynchronous error into a PermissionError, if it is one.
func parseViolation(err error) (*PermissionError, bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil, false
	}
	m := violationRe.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, false
	}
	op := "publish"
	if strings.EqualFold(m[1], "subscription") {
		op = "subscribe"
	}
	return &PermissionError{Op: op, Subject: m[2]}, true
}

// guard is a call waiting for a permission violation on a subject filter.
type guard struct {
	filter string
	fail   context.CancelCauseFunc
}

// asyncError is the connection's asynchronous error handler: it fails the guards a
// permission violation concerns and logs every asynchronous error.
func (c *Conn) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	pe, ok := parseViolation(err)
	if !ok {
		if sub != nil {
			c.log.Warn("nats asynchronous error", "subject", sub.Subject, "error", err)
		} else {
			c.log.Warn("nats asynchronous error", "error", err)
		}
		return
	}
	c.log.Warn("nats permission violation", "op", pe.Op, "subject", pe.Subject)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Every request needs the subscription to the connection's replies: when it is refused,
	// every request fails, whatever its subject.
	everything := pe.Op == "subscribe" && strings.HasPrefix(pe.Subject, c.inbox)
	if everything {
		c.inboxErr = pe
	}
	for g := range c.guards {
		if everything || subjectMatches(g.filter, pe.Subject) {
			g.fail(pe)
		}
	}
}

// Guard runs fn with a context that ends, with a *PermissionError, as soon as the server
// refuses this connection a publish or subscription on a subject that filter (a subject,
// wildcards allowed) matches, or the subscription to its replies; Guard then returns that
// *PermissionError instead of fn's error. Use it around calls that publish for you, e.g.
//
//	err := c.Guard(ctx, "$KV.maintenance.>", func(ctx context.Context) error {
//		_, err := kv.Put(ctx, key, value)
//		return err
//	})
//
// Permissions are per subject: a violation by another call on the same subject while fn runs
// fails fn too, which is the answer fn would get anyway.
func (c *Conn) Guard(ctx context.Context, filter string, fn func(context.Context) error) error {
	c.mu.Lock()
	if c.inboxErr != nil {
		err := c.inboxErr
		c.mu.Unlock()
		return err
	}
	gctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	g := &guard{filter: filter, fail: fail}
	c.guards[g] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.guards, g)
		c.mu.Unlock()
	}()
	err := fn(gctx)
	var pe *PermissionError
	if errors.As(context.Cause(gctx), &pe) {
		return pe
	}
	return err
}

// PublishMsg publishes msg to JetStream like jetstream.JetStream.PublishMsg, except that a
// subject this user may not publish to fails at once with a *PermissionError (errors.Is
// ErrPermissionDenied) instead of waiting for the publish timeout.
func (c *Conn) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := c.Guard(ctx, msg.Subject, func(ctx context.Context) error {
		var err error
		ack, err = c.JS.PublishMsg(ctx, msg, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ack, nil
}

// Publish is PublishMsg of a message without headers.
func (c *Conn) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return c.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, opts...)
}

// subjectMatches reports whether subject matches filter, with NATS wildcards: "*" is one
// token, a final ">" one or more.
func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" && i == len(ft)-1 {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}
