package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// migrateRecords moves the records of the first layout (one bucket, domain.Bucket, keyed by
// the entity key) into the cells (domain.Cells buckets, keyed by the located key), then
// removes the old bucket. Run with the functions stopped (README, Upgrading). It can stop
// anywhere and run again: a record the cell already holds is left as it is (written there
// since, it is the newer), and the old bucket goes only once every record is in a cell.
// A record's revision is its new sequence in its cell.
func migrateRecords(ctx context.Context, js jetstream.JetStream) Change {
	const old = "KV_" + domain.Bucket
	ch := Change{Kind: "migrate", Name: domain.Bucket + " -> cells"}
	s, done := firstLayout(ctx, js, old, &ch)
	if done {
		return ch
	}
	var err error
	kvs := map[domain.Cell]jetstream.KeyValue{}
	for _, c := range domain.AllCells() {
		if kvs[c], err = js.KeyValue(ctx, c.RecordsBucket()); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
	}
	moved, kept := 0, 0
	if s.CachedInfo().State.Msgs > 0 {
		prefix := "$KV." + domain.Bucket + "."
		err = store.ScanLast(ctx, js, old, prefix+">", func(msg jetstream.Msg, _ uint64) error {
			if store.Deleted(msg) {
				return nil
			}
			key := strings.TrimPrefix(msg.Subject(), prefix)
			if _, err := domain.DecodeKey(key); err != nil {
				return fmt.Errorf("record %q is not under an entity key: %w", key, err)
			}
			_, err := kvs[domain.CellOf(key)].Create(ctx, domain.Located(key), msg.Data())
			switch {
			case errors.Is(err, jetstream.ErrKeyExists):
				kept++
			case err != nil:
				return fmt.Errorf("move %s: %w", key, err)
			default:
				moved++
			}
			return nil
		})
		if err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
	}
	if err := js.DeleteStream(ctx, old); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		ch.Action, ch.Err = Failed, fmt.Errorf("remove the old bucket after moving its records: %w", err)
		return ch
	}
	ch.Action = Updated
	ch.Fields = []string{fmt.Sprintf("%d records moved", moved)}
	if kept > 0 {
		ch.Fields = append(ch.Fields, fmt.Sprintf("%d already there", kept))
	}
	return ch
}

// firstLayout finds a stream of the first layout; done (ch says how) when there is none, or it
// cannot be read.
func firstLayout(ctx context.Context, js jetstream.JetStream, name string, ch *Change) (jetstream.Stream, bool) {
	s, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		ch.Action = Unchanged
		return nil, true
	case err != nil:
		ch.Action, ch.Err = Failed, err
		return nil, true
	}
	return s, false
}

// migrateEvents moves the entities' events of the first layout (maint.evt.<key> in
// MAINT_EVENTS) into their cells' streams, under maint.evt.<cell>.<subscription>.<group>.<key>.
//
// A campaign under way remembers how far it read MAINT_EVENTS, and each of its entities the
// sequence of the last outcome it observed there: sequences the move does not keep. So the
// move waits until no campaign is under way (finished or cancelled), and until then the
// events stay where they are (Run leaves MAINT_EVENTS as it is).
func migrateEvents(ctx context.Context, js jetstream.JetStream) Change {
	if s, err := js.Stream(ctx, domain.EventsStream); err == nil && slices.Contains(s.CachedInfo().Config.Subjects, domain.EventPrefix+"*") {
		if ids, err := campaignsUnderWay(ctx, js); err != nil || len(ids) > 0 {
			if err == nil {
				err = fmt.Errorf("%w: campaigns %s are under way: let them finish (or cancel them), then provision again to move the events into the cells",
					ErrMigrationWaits, strings.Join(ids, ", "))
			}
			return Change{Kind: "migrate", Name: domain.EventsStream + " -> cells", Action: Failed, Err: err}
		}
	}
	return moveStream(ctx, js, domain.EventsStream, domain.EventPrefix+"*", domain.EventSubject, false)
}

// ErrMigrationWaits is wrapped when a move of the first layout cannot be made yet.
var ErrMigrationWaits = errors.New("the move into the cells waits")

// campaignsUnderWay lists the campaigns not finished, if there is a campaigns bucket.
func campaignsUnderWay(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	if _, err := js.Stream(ctx, "KV_"+domain.CampaignsBucket); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	cs, err := campaignstore.Open(ctx, js)
	if err != nil {
		return nil, err
	}
	ids, err := cs.IDs(ctx)
	if err != nil {
		return nil, err
	}
	var busy []string
	for _, id := range ids {
		c, _, err := cs.Campaign(ctx, id)
		if err != nil {
			return nil, err
		}
		if c != nil && !c.Finished {
			busy = append(busy, id)
		}
	}
	return busy, nil
}

// migrateNotices moves the notices of the first layout (MAINT_NOTICES, maint.notice.<key>)
// into their cells' streams, then removes MAINT_NOTICES.
func migrateNotices(ctx context.Context, js jetstream.JetStream) Change {
	return moveStream(ctx, js, domain.NoticesStream, domain.NoticePrefix+"*", domain.NoticeSubject, true)
}

// moveChunk is how many messages a move publishes before it drops them from the old stream:
// a move stopped half-way publishes at most this many again when it runs again (and those
// within the duplicate window are dropped by their Nats-Msg-Id).
const moveChunk = 1024

// moveStream moves the messages of stream under filter (subjects <prefix>.<key>) to the
// subject subjectOf(key) gives (see moveMessages). With drop, the old stream is removed at
// the end. A stream that does not exist, or no longer holds the filter, has nothing to move.
func moveStream(ctx context.Context, js jetstream.JetStream, stream, filter string, subjectOf func(string) string, drop bool) Change {
	ch := Change{Kind: "migrate", Name: stream + " -> cells"}
	s, done := firstLayout(ctx, js, stream, &ch)
	if done {
		return ch
	}
	if !slices.Contains(s.CachedInfo().Config.Subjects, filter) {
		ch.Action = Unchanged
		return ch
	}
	moved, err := moveMessages(ctx, js, s, filter, subjectOf)
	if err == nil && drop {
		if err = js.DeleteStream(ctx, stream); errors.Is(err, jetstream.ErrStreamNotFound) {
			err = nil
		}
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	ch.Action = Updated
	ch.Fields = []string{fmt.Sprintf("%d messages moved", moved)}
	return ch
}

// moveMessages moves the messages of s under filter to the subject subjectOf(key) gives, in
// order, with their headers and bodies, dropping each chunk from the old subjects once it is
// stored. A moved message's stored time is its move's; the time it was first stored goes in
// domain.HeaderFirstStored.
func moveMessages(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, filter string, subjectOf func(string) string) (int, error) {
	stream := s.CachedInfo().Config.Name
	moved := 0
	var acks []jetstream.PubAckFuture
	var last uint64
	flush := func() error {
		for _, a := range acks {
			select {
			case <-a.Ok():
			case err := <-a.Err():
				return fmt.Errorf("move %s: %w", a.Msg().Subject, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		acks = acks[:0]
		if last > 0 {
			if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter), jetstream.WithPurgeSequence(last+1)); err != nil {
				return fmt.Errorf("drop what moved from %s: %w", stream, err)
			}
		}
		return nil
	}
	err := store.Read(ctx, js, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}, 0, func(msg jetstream.Msg, seq uint64) error {
		out, err := movedMsg(msg, subjectOf)
		if err != nil {
			return fmt.Errorf("message %d of %s: %w", seq, stream, err)
		}
		a, err := js.PublishMsgAsync(out)
		if err != nil {
			return fmt.Errorf("move message %d of %s: %w", seq, stream, err)
		}
		acks = append(acks, a)
		last = seq
		moved++
		if len(acks) == moveChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return moved, err
}

// movedMsg is msg under its new subject: its headers (but the expectations of its first
// write), the time it was first stored, and its body.
func movedMsg(msg jetstream.Msg, subjectOf func(string) string) (*nats.Msg, error) {
	key := domain.KeyFromSubject(msg.Subject())
	if _, err := domain.DecodeKey(key); err != nil {
		return nil, fmt.Errorf("not under an entity key: %w", err)
	}
	out := nats.NewMsg(subjectOf(key))
	for k, v := range msg.Headers() {
		if !strings.HasPrefix(k, "Nats-Expected") {
			out.Header[k] = v
		}
	}
	if md, err := msg.Metadata(); err == nil && out.Header.Get(domain.HeaderFirstStored) == "" {
		out.Header.Set(domain.HeaderFirstStored, md.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	out.Data = msg.Data()
	return out, nil
}

// migratePolicies moves the policies of the first layout (the bucket's subjects under the scope
// key alone) to their located keys (domain.PolicySubject), every revision the bucket keeps in
// order, each in force from when it was first stored (domain.HeaderFirstStored).
func migratePolicies(ctx context.Context, js jetstream.JetStream) Change {
	ch := Change{Kind: "migrate", Name: domain.PoliciesBucket + " -> located keys"}
	s, done := firstLayout(ctx, js, domain.PoliciesBucketStream, &ch)
	if done {
		return ch
	}
	filter := domain.PoliciesPrefix + "*"
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	if len(info.State.Subjects) == 0 {
		ch.Action = Unchanged
		return ch
	}
	moved, err := moveMessages(ctx, js, s, filter, domain.PolicySubject)
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	ch.Action, ch.Fields = Updated, []string{fmt.Sprintf("%d revisions moved", moved)}
	return ch
}

// migrateCampaignEntities moves the campaigns' entity phases of the first layout
// (<id>.<key> in domain.CampaignEntitiesBucket) to their located keys
// (domain.CampaignEntityKey: <id>.<subscription>.<group>.<key>), then drops the old keys
// without leaving markers. Like every move it runs with the functions stopped, and can stop
// anywhere and run again: a phase already at its new key is the newer and stays.
func migrateCampaignEntities(ctx context.Context, js jetstream.JetStream) Change {
	const stream = "KV_" + domain.CampaignEntitiesBucket
	prefix := "$KV." + domain.CampaignEntitiesBucket + "."
	filter := prefix + "*.*"
	ch := Change{Kind: "migrate", Name: domain.CampaignEntitiesBucket + " -> located keys"}
	s, done := firstLayout(ctx, js, stream, &ch)
	if done {
		return ch
	}
	kv, err := js.KeyValue(ctx, domain.CampaignEntitiesBucket)
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	moved := 0
	err = store.ScanLast(ctx, js, stream, filter, func(msg jetstream.Msg, _ uint64) error {
		if store.Deleted(msg) {
			return nil
		}
		id, key, _ := strings.Cut(strings.TrimPrefix(msg.Subject(), prefix), ".")
		_, err := kv.Create(ctx, domain.CampaignEntityKey(id, key), msg.Data())
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("move the phase of %s in campaign %s: %w", key, id, err)
		}
		moved++
		return nil
	})
	if err == nil {
		err = s.Purge(ctx, jetstream.WithPurgeSubject(filter))
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	ch.Action = Unchanged
	if moved > 0 {
		ch.Action, ch.Fields = Updated, []string{fmt.Sprintf("%d phases moved", moved)}
	}
	return ch
}
