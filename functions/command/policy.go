package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/store"
)

// Customers' maintenance policies in the command function. The decision takes the policy in
// force when the command was stored as a fact of the delivery (delivery.Policy): the handler
// looks it up in the replica's view of the policies bucket by the command's stored time
// (store.Policies.At), so that every replica and every redelivery judges by the same revision.

// needsPolicy reports whether a policy could refuse or shape the command: only those are
// looked up (a None, CustomerActionNeeded, an update's outcome or a Pending without a window
// never is).
func needsPolicy(c domain.Command) bool {
	return c.Task == domain.TaskPending && c.Window != nil || c.Task.Kind() == domain.KindUpdate || c.Task == domain.TaskReschedule
}

// enforcePolicy is the notice and the policy in force (policy.Enforce): in the contract's order,
// a Pending's window and its notice, then an update's stored time; force overrides the policy,
// and the verdict says so. A Reschedule is judged by its own rules (transition).
func enforcePolicy(c domain.Command, d delivery, rules settings) policy.Decision {
	if c.Task == domain.TaskReschedule {
		return policy.Decision{}
	}
	return policy.Enforce(c, d.StoredAt, d.Policy, rules.MinNotice)
}

// transition is the record the command makes: the transition table, or for a Reschedule the
// window moved as the policy in force allows (policy.Reschedule, EC2's rules).
func transition(rec domain.Record, c domain.Command, d delivery, at time.Time) (domain.Record, domain.Transition, *domain.Rejection) {
	if c.Task != domain.TaskReschedule {
		return domain.Apply(rec, c, at)
	}
	state := rec.State
	if state == "" {
		state = domain.StateNone
	}
	w, rej := policy.Reschedule(rec, c, d.StoredAt, d.Policy, d.Deadline)
	if rej != nil {
		return rec, domain.Transition{From: state, To: state}, rej
	}
	next, tr := domain.Reschedule(rec, w, at)
	return next, tr, nil
}

// policies finds the revision of the policies bucket in force for an entity at a stored time.
type policies interface {
	At(ctx context.Context, key string, t time.Time) (*store.Revision, error)
}

// Deadlines finds the deadline of a campaign (a Reschedule's window must end by it); zero
// when the campaign has none or is unknown.
type Deadlines interface {
	Deadline(ctx context.Context, ref domain.CampaignRef) (time.Time, error)
}

// policyInForce is the policy in force for the entity of key when cmd was stored (nil when
// none covers it, or the command is one no policy judges). A revision the bucket no longer
// keeps, or that does not compile, will not be found on a retry either: dead-letter it.
func (d *Applier) policyInForce(ctx context.Context, key string, cmd domain.Command, storedAt time.Time) (*policy.Policy, error) {
	if d.policies == nil || !needsPolicy(cmd) {
		return nil, nil
	}
	rev, err := d.policies.At(ctx, key, storedAt)
	if errors.Is(err, store.ErrPolicyForgotten) {
		return nil, function.Permanent(fmt.Errorf("policy in force: %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("policy in force: %w", err)
	}
	p, err := rev.Policy()
	if err != nil {
		return nil, function.Permanent(fmt.Errorf("policy in force (revision %d): %w", rev.Seq, err))
	}
	return p, nil
}

// deadline is the deadline of the campaign whose window a Reschedule would move.
func (d *Applier) deadline(ctx context.Context, rec domain.Record, cmd domain.Command) (time.Time, error) {
	if d.deadlines == nil || cmd.Task != domain.TaskReschedule || rec.Campaign == nil {
		return time.Time{}, nil
	}
	t, err := d.deadlines.Deadline(ctx, *rec.Campaign)
	if err != nil {
		return time.Time{}, fmt.Errorf("campaign deadline: %w", err)
	}
	return t, nil
}
