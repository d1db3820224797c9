package campaign

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// observed is an outcome event of an entity of a campaign, with its MAINT_EVENTS sequence.
type observed struct {
	key string
	seq uint64
	ev  domain.Event
}

// outcomes are the outcome events of campaigns' entities, by campaign id, in stream order, and
// the stream sequence they were read up to.
type outcomes struct {
	byCampaign map[string][]observed
	upTo       uint64
}

// maxEventsPerRead bounds the outcome events one read takes in: a function that was down for
// long catches up over several passes.
const maxEventsPerRead = 2_000_000

// lastEventSeq is MAINT_EVENTS's last sequence now.
func (f *Function) lastEventSeq(ctx context.Context) (uint64, error) {
	info, err := f.events.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("events stream: %w", err)
	}
	return info.State.LastSeq, nil
}

// readOutcomes reads the outcome events of entities stored after sequence from, up to the
// stream's last sequence when the read starts, and keeps those of campaigns: an announcement
// or a withdrawal by its id, any other by the campaign it names. Most events are not a
// campaign's; a look at the body spares decoding them.
func (f *Function) readOutcomes(ctx context.Context, from uint64) (outcomes, error) {
	last, err := f.lastEventSeq(ctx)
	if err != nil || last <= from {
		return outcomes{upTo: max(from, last)}, err
	}
	until := min(last, from+maxEventsPerRead)
	out := outcomes{byCampaign: map[string][]observed{}, upTo: until}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.EventPrefix + "*"}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1,
	}
	err = store.Read(ctx, f.js, domain.EventsStream, cfg, until, func(m jetstream.Msg, seq uint64) error {
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
