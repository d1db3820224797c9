package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Policy is a scope's policy as the bucket holds it.
type Policy struct {
	Revision *store.Revision
	// Policy is the document compiled (nil when the revision is a delete).
	Policy *policy.Policy
}

// PolicyResult is what became of a sent policy command (Seq in MAINT_POLICIES).
type PolicyResult = CommandResult[policy.Command, domain.PolicyEvent]

// PolicyOutcomeError is returned with the result when a policy command was rejected or
// dead-lettered.
type PolicyOutcomeError struct{ Event domain.PolicyEvent }

func (e *PolicyOutcomeError) Error() string {
	ev := e.Event
	return describeOutcome(fmt.Sprintf("policy command %s (%s %s) %s", ev.CommandID, ev.Action, ev.Scope, ev.Outcome), ev.Code, ev.Target, ev.Message)
}

// SendPolicy publishes a policy command to maint.policy.<scope key> with Nats-Msg-Id = its id
// (signed, issuedAt inside the body, when the client has a key) and waits, until ctx ends, for
// its outcome on maint.evt.policy.<scope key>. A rejected or dead-lettered command returns the
// result and a *PolicyOutcomeError; no outcome in time an error wrapping ErrNoOutcome.
func (c *Client) SendPolicy(ctx context.Context, cmd policy.Command) (*PolicyResult, error) {
	msg, key, err := c.policyMsg(&cmd)
	if err != nil {
		return nil, err
	}
	return sendAwaiting(ctx, c, cmd, msg, domain.PolicyEventSubject(key), awaitedOutcome[domain.PolicyEvent]{
		id:     cmd.ID,
		decode: domain.DecodePolicyEvent,
		idOf:   func(ev domain.PolicyEvent) string { return ev.CommandID },
		last:   func(ctx context.Context) (domain.PolicyEvent, bool) { return c.lastPolicyEvent(ctx, key) },
		late: func(seq uint64) error {
			return fmt.Errorf("%w for policy command %s on %s: it is stored in %s (sequence %d) and takes effect when a policies function runs",
				ErrNoOutcome, cmd.ID, cmd.Scope, domain.PoliciesStream, seq)
		},
	}, func(ev domain.PolicyEvent) error {
		if Failed(ev.Outcome) {
			return &PolicyOutcomeError{Event: ev}
		}
		return nil
	})
}

func (c *Client) lastPolicyEvent(ctx context.Context, key string) (domain.PolicyEvent, bool) {
	s, err := c.JS.Stream(ctx, domain.EventsStream)
	if err != nil {
		return domain.PolicyEvent{}, false
	}
	m, err := s.GetLastMsgForSubject(ctx, domain.PolicyEventSubject(key))
	if err != nil {
		return domain.PolicyEvent{}, false
	}
	ev, err := domain.DecodePolicyEvent(m.Data)
	return ev, err == nil
}

// policyMsg checks cmd and builds its message: the JSON body on maint.policy.<scope key>, the
// id as Nats-Msg-Id, and a signature when the client has a key.
func (c *Client) policyMsg(cmd *policy.Command) (*nats.Msg, string, error) {
	if c.signer != nil && cmd.IssuedAt == "" {
		cmd.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, "", err
	}
	checked, rej := policy.DecodeCommand(body, "", cmd.ID)
	if rej != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidCommand, rej)
	}
	key := checked.ParsedScope().Key
	msg, err := signing.Msg(c.signer, domain.PolicyCommandSubject(key), cmd.ID, body)
	if err != nil {
		return nil, "", err
	}
	return msg, key, nil
}

// PolicyOf reads the policy of scope as the bucket holds it now; ok false when the scope has
// none (never had, or deleted).
func (c *Client) PolicyOf(ctx context.Context, scope string) (Policy, bool, error) {
	sc, rej := policy.ParseScope(scope)
	if rej != nil {
		return Policy{}, false, rej
	}
	return c.lastPolicy(ctx, sc.Key)
}

// PolicyFor is the policy in force now for the entity resourceID: of the scopes that cover it,
// the most specific that has one (policy.CandidateKeys); ok false when none.
func (c *Client) PolicyFor(ctx context.Context, resourceID string) (Policy, bool, error) {
	keys, err := policy.CandidateKeysOf(resourceID)
	if err != nil {
		return Policy{}, false, err
	}
	for _, k := range keys {
		if p, ok, err := c.lastPolicy(ctx, k); err != nil || ok {
			return p, ok, err
		}
	}
	return Policy{}, false, nil
}

func (c *Client) lastPolicy(ctx context.Context, key string) (Policy, bool, error) {
	var p Policy
	err := c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		if len(c.scopes) > 0 {
			// Confined: a direct get names the scope's subject, which the server checks.
			var err error
			p.Revision, err = store.PeekPolicy(ctx, c.JS, key)
			return err
		}
		bucket, err := c.policiesBucket(ctx)
		if err != nil {
			return err
		}
		p.Revision, err = store.LastPolicy(ctx, bucket, key)
		return err
	})
	if errors.Is(err, natsconn.ErrPermissionDenied) {
		return Policy{}, false, fmt.Errorf("%w: the policy of %s: %w", ErrNotPermitted, key, err)
	}
	if err != nil || p.Revision == nil || p.Revision.Deleted {
		return Policy{}, false, err
	}
	p.Policy, err = p.Revision.Policy()
	return p, err == nil, err
}

// Policies lists the policy of every scope that has one, by scope key.
func (c *Client) Policies(ctx context.Context) ([]Policy, error) {
	var out []Policy
	err := c.eachPolicy(ctx, func(r *store.Revision, pol *policy.Policy, err error) {
		if err != nil {
			c.log.Warn("skipping a stored policy that does not compile", "key", r.Key, "error", err)
			return
		}
		out = append(out, Policy{Revision: r, Policy: pol})
	})
	slices.SortFunc(out, func(a, b Policy) int { return strings.Compare(a.Revision.Key, b.Revision.Key) })
	return out, err
}

// eachPolicy calls fn with the last revision of every scope that has a policy, compiled (err:
// why it does not compile), in one pass over the bucket.
func (c *Client) eachPolicy(ctx context.Context, fn func(r *store.Revision, pol *policy.Policy, err error)) error {
	each := func(r *store.Revision) error {
		if !r.Deleted {
			pol, err := r.Policy()
			fn(r, pol, err)
		}
		return nil
	}
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		if len(c.scopes) > 0 {
			// Confined: the policies of its scopes, through filters the server checks.
			for _, s := range domain.Disjoint(c.scopes) {
				if err := store.ScanPoliciesUnder(ctx, c.JS, domain.PoliciesPrefix+s.Tokens(), each); err != nil {
					return err
				}
			}
			return nil
		}
		bucket, err := c.policiesBucket(ctx)
		if err != nil {
			return err
		}
		return store.ScanPolicies(ctx, bucket, each)
	})
}

// InForce reads the policies in force now, by scope key, each with the stored time of its
// revision: what fleet.View needs to tell a conflict as the emitter and the notices function
// do. A scope whose policy does not compile is kept without one (it hides the broader scopes'
// policies from its entities, as it does in the emitter). No policies bucket: no policy.
func (c *Client) InForce(ctx context.Context) (fleet.Policies, error) {
	out := fleet.Policies{}
	err := c.eachPolicy(ctx, func(r *store.Revision, pol *policy.Policy, err error) {
		if err != nil {
			c.log.Warn("a stored policy does not compile; its entities show no conflict", "key", r.Key, "error", err)
		}
		out[r.Key] = fleet.InForce{Policy: pol, Since: r.At}
	})
	if errors.Is(err, ErrNotProvisioned) {
		return fleet.Policies{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policies in force: %w", err)
	}
	return out, nil
}

func (c *Client) policiesBucket(ctx context.Context) (jetstream.Stream, error) {
	s, err := c.JS.Stream(ctx, domain.PoliciesBucketStream)
	if err != nil {
		return nil, notProvisioned(err)
	}
	return s, nil
}
