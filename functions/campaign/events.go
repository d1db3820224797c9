package campaign

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// observed is an outcome event of an entity of a campaign, with its sequence in its cell.
type observed struct {
	key string
	seq uint64
	ev  domain.Event
}

// outcomes are the outcome events of campaigns' entities, by campaign id, in stream order
// within each cell, and the sequences they were read up to.
type outcomes struct {
	byCampaign map[string][]observed
	upTo       core.Cursor
}

// maxEventsPerRead bounds the outcome events one read takes in from each cell: a function
// that was down for long catches up over several passes.
const maxEventsPerRead = 2_000_000 / domain.Cells

// lastEventSeqs is each cell's events stream's last sequence now.
func (f *Function) lastEventSeqs(ctx context.Context) (core.Cursor, error) {
	var last core.Cursor
	for _, c := range domain.AllCells() {
		s, err := f.js.Stream(ctx, c.EventsStream())
		if err != nil {
			return last, fmt.Errorf("events stream: %w", err)
		}
		last[c] = s.CachedInfo().State.LastSeq
	}
	return last, nil
}

// readOutcomes reads the outcome events of entities stored after cursor from, up to each
// stream's last sequence when the read starts, and keeps those of campaigns: an announcement
// or a withdrawal by its id, any other by the campaign it names. Most events are not a
// campaign's; a look at the body spares decoding them.
func (f *Function) readOutcomes(ctx context.Context, from core.Cursor) (outcomes, error) {
	last, err := f.lastEventSeqs(ctx)
	out := outcomes{byCampaign: map[string][]observed{}, upTo: from.Max(last)}
	if err != nil {
		return outcomes{upTo: from}, err
	}
	for _, c := range domain.AllCells() {
		if last[c] <= from[c] {
			continue
		}
		until := min(last[c], from[c]+maxEventsPerRead)
		out.upTo[c] = until
		cfg := jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{c.EventsSubjects()}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from[c] + 1,
		}
		err := store.Read(ctx, f.js, c.EventsStream(), cfg, until, func(m jetstream.Msg, seq uint64) error {
			if !bytes.Contains(m.Data(), []byte("campaign")) {
				return nil
			}
			ev, err := domain.DecodeEvent(m.Data())
			if err != nil {
				return nil // not ours to judge; the command function wrote it
			}
			if id := campaignOf(ev); id != "" {
				out.byCampaign[id] = append(out.byCampaign[id], observed{key: domain.KeyFromSubject(m.Subject()), seq: seq, ev: ev})
			}
			return nil
		})
		if err != nil {
			return outcomes{}, fmt.Errorf("read outcome events: %w", err)
		}
	}
	return out, nil
}

// campaignOf is the campaign an outcome event concerns ("" for none).
func campaignOf(ev domain.Event) string {
	if id, _, _, _, ok := admission.ParseCommandID(ev.CommandID); ok {
		return id
	}
	if ev.Campaign != nil {
		return ev.Campaign.ID
	}
	return ""
}
