package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/shared/subscription"
)

// SubscriptionResult is what became of a sent subscription command (Seq in
// MAINT_SUBSCRIPTIONS).
type SubscriptionResult = CommandResult[subscription.Command, domain.SubscriptionEvent]

// SubscriptionOutcomeError is returned with the result when a subscription command was
// rejected or dead-lettered.
type SubscriptionOutcomeError struct{ Event domain.SubscriptionEvent }

func (e *SubscriptionOutcomeError) Error() string {
	ev := e.Event
	return describeOutcome(fmt.Sprintf("subscription command %s (%s %s) %s", ev.CommandID, ev.Action, ev.Name, ev.Outcome), ev.Code, ev.Target, ev.Message)
}

// SendSubscription publishes a subscription command on maint.subscription.cmd.<located name>
// with Nats-Msg-Id = its id (signed, issuedAt inside the body, when the client has a key) and
// waits, until ctx ends, for its outcome on maint.subscription.evt.<located name>. A rejected
// or dead-lettered command returns the result and a *SubscriptionOutcomeError; no outcome in
// time an error wrapping ErrNoOutcome; a subject this user may not publish to (another
// tenant's) a *natsconn.PermissionError at once.
func (c *Client) SendSubscription(ctx context.Context, cmd subscription.Command) (*SubscriptionResult, error) {
	if c.signer != nil && cmd.IssuedAt == "" {
		cmd.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	checked, rej := subscription.DecodeCommand(body, "", cmd.ID)
	if rej != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCommand, rej)
	}
	key := checked.Key()
	msg, err := signing.Msg(c.signer, domain.SubscriptionCommandSubject(key), cmd.ID, body)
	if err != nil {
		return nil, err
	}
	return sendAwaiting(ctx, c, cmd, msg, domain.SubscriptionEventSubject(key), awaitedOutcome[domain.SubscriptionEvent]{
		id:     cmd.ID,
		decode: domain.DecodeSubscriptionEvent,
		idOf:   func(ev domain.SubscriptionEvent) string { return ev.CommandID },
		last:   func(ctx context.Context) (domain.SubscriptionEvent, bool) { return c.lastSubscriptionEvent(ctx, key) },
		late: func(seq uint64) error {
			return fmt.Errorf("%w for subscription command %s (%s %s): it is stored in %s (sequence %d) and takes effect when a subscriptions function runs",
				ErrNoOutcome, cmd.ID, cmd.Action, cmd.Name, domain.SubscriptionsStream, seq)
		},
	}, func(ev domain.SubscriptionEvent) error {
		if Failed(ev.Outcome) {
			return &SubscriptionOutcomeError{Event: ev}
		}
		return nil
	})
}

// lastSubscriptionEvent reads the last outcome of the located name key, by an ordered consumer
// filtered on its subject (what a customer may create).
func (c *Client) lastSubscriptionEvent(ctx context.Context, key string) (domain.SubscriptionEvent, bool) {
	cons, err := c.JS.OrderedConsumer(ctx, domain.SubscriptionEventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.SubscriptionEventSubject(key)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return domain.SubscriptionEvent{}, false
	}
	m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return domain.SubscriptionEvent{}, false
	}
	ev, err := domain.DecodeSubscriptionEvent(m.Data())
	return ev, err == nil
}

// Subscriptions lists the self-service webhook subscriptions this user may see, by located
// name: every one for a user who may manage every one (an admin, or a server without users),
// those of its tenants for a customer user (SubscriptionTenants). Nothing is read that NATS
// would refuse this user: no other tenant's subscription reaches it.
func (c *Client) Subscriptions(ctx context.Context) ([]subscription.Stored, error) {
	var out []subscription.Stored
	tenants := c.SubscriptionTenants(ctx)
	err := c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		for _, tokens := range tenants {
			err := subscription.Scan(ctx, c.JS, tokens, func(s subscription.Stored, err error) error {
				if err != nil {
					c.log.Warn("skipping a stored subscription that does not read", "key", s.Key, "error", err)
					return nil
				}
				out = append(out, s)
				return nil
			})
			if err != nil {
				return notProvisioned(err)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b subscription.Stored) int { return strings.Compare(a.Key, b.Key) })
	return slices.CompactFunc(out, func(a, b subscription.Stored) bool { return a.Key == b.Key }), err
}

// SubscriptionTenants are the located-name filters of the subscriptions this user may manage,
// as the server's permissions for it say ($SYS.REQ.USER.INFO): ">" for every one (an admin, a
// server without users, or when the server does not say), else each tenant's tokens
// ("<sub>.>", "<sub>.<group>.>").
func (c *Client) SubscriptionTenants(ctx context.Context) []string {
	var info struct {
		Data *struct {
			Permissions *struct {
				Publish *struct {
					Allow []string `json:"allow"`
				} `json:"publish"`
			} `json:"permissions"`
		} `json:"data"`
	}
	err := c.Guard(ctx, userInfoSubject, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := c.NC.RequestWithContext(ctx, userInfoSubject, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(m.Data, &info)
	})
	if err != nil || info.Data == nil || info.Data.Permissions == nil || info.Data.Permissions.Publish == nil {
		return []string{">"}
	}
	var tenants []string
	for _, allow := range info.Data.Permissions.Publish.Allow {
		t, ok := strings.CutPrefix(allow, domain.SubscriptionCommandPrefix)
		if ok && t == ">" {
			return []string{">"}
		}
		if ok {
			tenants = append(tenants, t)
		}
	}
	if len(tenants) == 0 {
		return []string{">"}
	}
	return tenants
}

// userInfoSubject is the request by which a client learns its own permissions.
const userInfoSubject = "$SYS.REQ.USER.INFO"
