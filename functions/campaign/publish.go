package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
)

// recheckEvery is how many commands a pass publishes between two looks at its campaign: one
// paused or cancelled meanwhile stops the pass there.
const recheckEvery = 2048

// publish sends the commands the pass decided, many in flight at once. An entity whose
// command could not be published, or was not published because the campaign changed, goes
// back to what its events made of it (the next pass decides it again).
func (p *pass) publish(ctx context.Context) error {
	if len(p.cmds) == 0 {
		return nil
	}
	if err := p.unchanged(ctx); err != nil {
		return err
	}
	if h := p.f.hooks.beforePublish; h != nil {
		if err := h(p.c.ID, len(p.cmds)); err != nil {
			return err
		}
	}
	sent := 0
	pl := newPipeline(p.f.js, p.f.cfg.InFlight, func(k int, _ *jetstream.PubAck, err error) {
		if err == nil {
			sent++
			return
		}
		p.f.log.Warn("campaign command not published; the next pass sends it again", "campaign", p.c.ID, "command_id", p.cmds[k].cmd.ID, "err", err)
		p.undo(p.cmds[k].i)
	})
	var stop error
	for k, c := range p.cmds {
		if k > 0 && k%recheckEvery == 0 && stop == nil {
			stop = p.unchanged(ctx)
		}
		if stop != nil {
			p.undo(c.i)
			continue
		}
		m, err := p.f.commandMsg(p.ents[c.i].Key, c.cmd)
		if err != nil {
			return err
		}
		if err := pl.add(ctx, k, m); err != nil {
			return err
		}
	}
	if err := pl.wait(ctx); err != nil {
		return err
	}
	p.f.log.Info("campaign commands published", "campaign", p.c.ID, "published", sent, "decided", len(p.cmds))
	if h := p.f.hooks.afterPublish; h != nil {
		if err := h(p.c.ID, sent); err != nil {
			return err
		}
	}
	return nil
}

// undo puts the entity at i back to what its events made of it.
func (p *pass) undo(i int) {
	p.ents[i].Entity = p.observed[i]
	p.incomplete = true
}

// unchanged reports errMoved when the campaign's status, generation or withdrawal changed
// since the pass read it.
func (p *pass) unchanged(ctx context.Context) error {
	c, _, err := p.f.store.Campaign(ctx, p.c.ID)
	if err != nil {
		return err
	}
	if c == nil || c.Status != p.c.Status || c.Generation != p.c.Generation || c.Withdraw != p.c.Withdraw || !wavesOpen(c, p.c) {
		return errMoved
	}
	return nil
}

// wavesOpen reports whether every wave open in b is open in a.
func wavesOpen(a, b *core.Campaign) bool {
	for i := range b.Waves {
		if b.WaveOpen(i) && !a.WaveOpen(i) {
			return false
		}
	}
	return true
}

// commandMsg is a command to the entity of key as an integrator would publish it: the id as
// Nats-Msg-Id, signed with the function's key when it has one.
func (f *Function) commandMsg(key string, c admission.Command) (*nats.Msg, error) {
	if f.cfg.Signer != nil {
		c.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	body, err := c.Encode()
	if err != nil {
		return nil, err
	}
	return signing.Msg(f.cfg.Signer, domain.CommandSubject(key), c.ID, body)
}

// write writes every entity the pass changed, many at once, each over the revision it read.
// One written meanwhile by another pass is read again (for the counts) and left to the next.
func (p *pass) write(ctx context.Context) error {
	var conflicts []int
	var failed error
	pl := newPipeline(p.f.js, p.f.cfg.InFlight, func(i int, ack *jetstream.PubAck, err error) {
		switch {
		case err == nil:
			p.ents[i].Revision = ack.Sequence
		case isConflict(err):
			conflicts = append(conflicts, i)
		case failed == nil:
			failed = err
		}
	})
	for i, s := range p.ents {
		e := s.Entity
		if sameEntity(e, p.loaded[i]) {
			continue // an event that changed nothing is not worth a write
		}
		e.EventSeq = max(e.EventSeq, p.lastSeen[i])
		b, err := core.EncodeEntity(e)
		if err != nil {
			return err
		}
		m := nats.NewMsg(campaignstore.EntitySubject(p.c.ID, s.Key))
		m.Data = b
		p.ents[i].Entity = e
		if err := pl.add(ctx, i, m, jetstream.WithExpectLastSequencePerSubject(s.Revision)); err != nil {
			return err
		}
	}
	if err := pl.wait(ctx); err != nil {
		return err
	}
	if failed != nil {
		return fmt.Errorf("write the entities of campaign %s: %w", p.c.ID, failed)
	}
	return p.reread(ctx, conflicts)
}

// reread reads again the entities another pass wrote meanwhile, for the counts.
func (p *pass) reread(ctx context.Context, idx []int) error {
	for _, i := range idx {
		s, ok, err := p.f.store.Entity(ctx, p.c.ID, p.ents[i].Key)
		if err != nil {
			return err
		}
		if ok {
			p.ents[i] = s
		}
		p.incomplete = true
	}
	return nil
}
