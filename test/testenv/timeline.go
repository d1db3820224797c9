package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// PublishTimeline stores n outcome events and notices of the given entities, in an order
// drawn by rng (about a third notices), one at a time: each is stored before the next is
// published, so the stored times follow the returned ids (an event's commandId, a notice's
// noticeId), which are unique for prefix. It may run in a goroutine of its own.
func PublishTimeline(t testing.TB, js jetstream.JetStream, rng *rand.Rand, prefix string, n int, ids []string) []string {
	t.Helper()
	out := make([]string, 0, n)
	for i := range n {
		res := ids[rng.IntN(len(ids))]
		notice := rng.IntN(3) == 0
		id := fmt.Sprintf("%s-e%d", prefix, i)
		if notice {
			id = fmt.Sprintf("%s-n%d", prefix, i)
		}
		if err := PublishTimelineEntry(js, res, id, notice, time.Now().UTC()); err != nil {
			t.Errorf("publish %s: %v", id, err) // not Fatal: it may run beside the test
			return out
		}
		out = append(out, id)
	}
	return out
}

// PublishTimelineEntry stores one entry of a timeline for resource res: a due notice (notice
// true) or an applied outcome event, with id as its noticeId or commandId and at as its at.
func PublishTimelineEntry(js jetstream.JetStream, res, id string, notice bool, at time.Time) error {
	key := domain.MustKey(res)
	var m *nats.Msg
	if notice {
		m = nats.NewMsg(domain.NoticeSubject(key))
		m.Data, _ = json.Marshal(domain.Notice{NoticeID: id, Kind: domain.NoticeDue, ResourceID: res, State: domain.StatePending, At: at})
		domain.SetCloudEventHeaders(m.Header, domain.NoticeCEType(string(domain.NoticeDue)), id, res, at)
	} else {
		m = nats.NewMsg(domain.EventSubject(key))
		m.Data, _ = domain.EncodeEvent(domain.Event{CommandID: id, ResourceID: res, Task: domain.TaskPending,
			Outcome: domain.OutcomeApplied, From: domain.StatePending, To: domain.StatePending, At: at})
		domain.SetCloudEventHeaders(m.Header, domain.CETypeApplied, id+":1", res, at)
	}
	m.Header.Set(domain.HeaderMsgID, id)
	_, err := js.PublishMsg(context.Background(), m)
	return err
}
