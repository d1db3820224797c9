package campaign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
)

// HandleCommand applies one campaign command: it returns nil once the command's outcome is
// published, an error to try it again.
func (f *Function) HandleCommand(ctx context.Context, msg function.Message) error {
	id := domain.KeyFromSubject(msg.Subject)
	ctl, rej := f.decode(msg, id)
	if rej != nil {
		return f.refuse(ctx, id, ctl, msg, rej)
	}
	for range maxConflicts {
		err := f.apply(ctx, id, ctl, msg)
		if !errors.Is(err, campaignstore.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("campaign %s kept changing: %w", id, campaignstore.ErrConflict)
}

// apply decides the command on the campaign as stored; ErrConflict: decide again.
func (f *Function) apply(ctx context.Context, id string, ctl core.Control, msg function.Message) error {
	c, rev, err := f.store.Campaign(ctx, id)
	if err != nil {
		return err
	}
	if c, rev, err = f.flush(ctx, c, rev); err != nil {
		return err
	}
	if c != nil {
		if a, ok := c.Remembered(ctl.ID); ok {
			if a.Seq == msg.Seq {
				return nil // delivered again: its outcome went out with its decision
			}
			return f.commit(ctx, c, rev, outcomeOf(ctl, msg, domain.OutcomeDuplicate, nil, c), nil, false)
		}
	}
	if ctl.Action == core.ActionCreate {
		return f.create(ctx, c, rev, ctl, msg)
	}
	if c == nil {
		return f.refuse(ctx, id, ctl, msg, &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "campaign",
			Message: fmt.Sprintf("there is no campaign %s", id)})
	}
	n, fx, rej := core.Apply(c, ctl, c.Tally, msg.Time)
	if rej != nil {
		return f.commit(ctx, c, rev, outcomeOf(ctl, msg, domain.OutcomeRejected, rej, c), nil, false)
	}
	if err := f.commit(ctx, n, rev, outcomeOf(ctl, msg, domain.OutcomeApplied, nil, n), fx.Events, true); err != nil {
		return err
	}
	f.kick(id)
	return nil
}

// commit stores the decision n (over rev) with its outcome and events in its outbox, then
// publishes them; remember: the command is applied, and one with its id again a duplicate.
func (f *Function) commit(ctx context.Context, n *core.Campaign, rev uint64, o core.Outcome, events []core.Event, remember bool) error {
	om, err := core.OutcomeMessage(o)
	if err != nil {
		return err
	}
	evs, err := core.Messages(events)
	if err != nil {
		return err
	}
	n.Outbox = append(append(slices.Clip(n.Outbox), om), evs...)
	if remember {
		n.Remember(core.Applied{ID: o.CommandID, Seq: o.CommandSeq})
	}
	if rev, err = f.store.Save(ctx, n, rev); err != nil {
		return err
	}
	f.log.Info("campaign command", "campaign", n.ID, "command_id", o.CommandID, "action", o.Action, "outcome", o.Outcome,
		"code", o.Code, "target", o.Target, "message", o.Message, "status", n.Status)
	_, _, err = f.flush(ctx, n, rev)
	return err
}

// refuse publishes the rejection of a command for a campaign that does not exist, or that
// could not be read: there is no outbox to hold it.
func (f *Function) refuse(ctx context.Context, id string, ctl core.Control, msg function.Message, rej *domain.Rejection) error {
	if ctl.ID == "" {
		ctl.ID = msg.Header.Get(domain.HeaderMsgID)
	}
	c, rev, err := f.store.Campaign(ctx, id)
	if err == nil && c != nil && campaignspec.ValidID(id) {
		return f.commit(ctx, c, rev, outcomeOf(ctl, msg, domain.OutcomeRejected, rej, c), nil, false)
	}
	return f.publishDirect(ctx, id, outcomeOf(ctl, msg, domain.OutcomeRejected, rej, nil))
}

// publishDirect publishes an outcome on the subject of a campaign that has no record.
func (f *Function) publishDirect(ctx context.Context, id string, o core.Outcome) error {
	if !campaignspec.ValidID(id) {
		f.log.Warn("campaign command on a subject that is no campaign id; dropped", "subject_id", id, "command_id", o.CommandID)
		return nil
	}
	m, err := core.OutcomeMessage(o)
	if err != nil {
		return err
	}
	f.log.Warn("campaign command refused", "campaign", id, "command_id", o.CommandID, "code", o.Code, "target", o.Target, "message", o.Message)
	if _, err := f.js.PublishMsg(ctx, eventMsg(domain.CampaignEventSubject(id), id, m)); err != nil {
		return fmt.Errorf("publish campaign outcome: %w", err)
	}
	return nil
}

// deadLetter publishes the outcome of a campaign command the runtime gave up on.
func (f *Function) deadLetter(ctx context.Context, msg function.Message, reason string) error {
	id := domain.KeyFromSubject(msg.Subject)
	ctl, _ := core.DecodeControl(msg.Data, id, "")
	o := outcomeOf(ctl, msg, domain.OutcomeDeadLettered, &domain.Rejection{Message: reason}, nil)
	return f.publishDirect(ctx, id, o)
}

// outcomeOf is the outcome of a command; c is the campaign after it (nil: none).
func outcomeOf(ctl core.Control, msg function.Message, o domain.Outcome, rej *domain.Rejection, c *core.Campaign) core.Outcome {
	out := core.Outcome{CommandID: ctl.ID, Campaign: ctl.Campaign, Action: ctl.Action, Outcome: o, At: msg.Time.UTC(),
		Actor: ctl.Actor, CommandSeq: msg.Seq}
	if out.CommandID == "" {
		out.CommandID = msg.Header.Get(domain.HeaderMsgID)
	}
	if out.Campaign == "" {
		out.Campaign = domain.KeyFromSubject(msg.Subject)
	}
	if rej != nil {
		out.Code, out.Target, out.Message = rej.Code, rej.Target, rej.Message
	}
	if o == domain.OutcomeDuplicate {
		out.Message = "the command was applied before; nothing changed"
	}
	if c != nil {
		out.Status, out.Generation = c.Status, c.Generation
	}
	return out
}

// decode reads and checks a campaign command: its signature over the exact body first, then
// its content, then that its signer is an admin within the command age.
func (f *Function) decode(msg function.Message, id string) (core.Control, *domain.Rejection) {
	msgID := msg.Header.Get(domain.HeaderMsgID)
	var signer *signing.Signer
	if f.cfg.Auth != nil && len(msg.Data) <= domain.MaxCommandBytes {
		var rej *domain.Rejection
		if signer, rej = f.cfg.Auth.Verify(msg.Data, msg.Header); rej != nil {
			ctl, _ := core.DecodeControl(msg.Data, id, msgID) // best effort: which command it was
			ctl.Actor = ""
			return ctl, rej
		}
	}
	ctl, rej := core.DecodeControl(msg.Data, id, msgID)
	if rej != nil || signer == nil {
		return ctl, rej
	}
	if !slices.Contains(signer.Roles, signing.RoleAdmin) {
		return ctl, unauthorized("signer %s (%v) may not send campaign commands: they are an admin's", signer.Name, signer.Roles)
	}
	issued, err := time.Parse(time.RFC3339Nano, ctl.IssuedAt)
	switch {
	case err != nil:
		return ctl, unauthorized("expired: a signed command must carry issuedAt inside the signed body")
	case msg.Time.Sub(issued) > f.cfg.MaxCommandAge:
		return ctl, unauthorized("expired: issued at %s, more than %s before it was stored", ctl.IssuedAt, f.cfg.MaxCommandAge)
	case issued.Sub(msg.Time) > time.Minute:
		return ctl, unauthorized("expired: issued at %s, more than a minute ahead of the stream's clock", ctl.IssuedAt)
	}
	ctl.Actor = signer.Name
	return ctl, nil
}

func unauthorized(format string, args ...any) *domain.Rejection {
	return &domain.Rejection{Code: domain.CodeUnauthorized, Message: fmt.Sprintf(format, args...)}
}
