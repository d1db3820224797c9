package command_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

// Every outcome event carries the CloudEvents attributes in binary mode: rebuilt with the
// CloudEvents SDK from the stored headers and body, each of 1,000 events of a mixed run is a
// valid CloudEvent whose id is its Nats-Msg-Id, and the body is the event as it always was.
func TestOutcomeEvents_AreCloudEvents(t *testing.T) {
	env := testenv.Start(t)
	// Commands whose id starts with "dl-" fail for good: they are dead-lettered.
	poison := func(h function.Handler) function.Handler {
		return func(ctx context.Context, msg function.Message) error {
			if bytes.Contains(msg.Data, []byte(`"id":"dl-`)) {
				return function.Permanent(errors.New("injected poison"))
			}
			return h(ctx, msg)
		}
	}
	startReplicas(t, env, 2, command.Config{}, poison)

	const entities, total = 20, 1000
	sent := 0
	for i := 0; sent < total; i++ {
		res := fmt.Sprintf("%s-%d", cluster, i%entities)
		key := domain.MustKey(res)
		switch i % 5 {
		case 0, 1: // applied
			send(t, env.JS, domain.Command{ID: fmt.Sprintf("ok-%d", i), ResourceID: res, Task: domain.TaskPending})
		case 2: // rejected: no update in progress
			send(t, env.JS, domain.Command{ID: fmt.Sprintf("no-%d", i), ResourceID: res, Task: domain.TaskUpdateSucceeded})
		case 3: // an applied command's id again, without the header: a duplicate
			prev := fmt.Sprintf("%s-%d", cluster, (i-3)%entities)
			cmd := domain.Command{ID: fmt.Sprintf("ok-%d", i-3), ResourceID: prev, Task: domain.TaskPending}
			b, _ := cmd.Encode()
			sendRaw(t, env.JS, domain.MustKey(prev), "", b)
		case 4:
			if i%10 == 4 { // dead-lettered
				send(t, env.JS, domain.Command{ID: fmt.Sprintf("dl-%d", i), ResourceID: res, Task: domain.TaskPending})
			} else { // unreadable: rejected, and the event has no resource ID
				sendRaw(t, env.JS, key, fmt.Sprintf("bad-%d", i), []byte("{not json"))
			}
		}
		sent++
	}

	deadline := time.Now().Add(60 * time.Second)
	var msgs []jetstream.RawStreamMsg
	for {
		msgs = storedEvents(t, env.JS)
		if len(msgs) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(msgs) != total {
		t.Fatalf("%d events, want %d", len(msgs), total)
	}

	ids := map[string]bool{}
	types := map[string]int{}
	for _, m := range msgs {
		h := http.Header{}
		for k, vs := range m.Header {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		ev, err := binding.ToEvent(context.Background(), cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(m.Data))))
		if err != nil {
			t.Fatalf("seq %d: not a CloudEvent: %v (headers %v)", m.Sequence, err, m.Header)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("seq %d: invalid CloudEvent: %v", m.Sequence, err)
		}
		body, err := domain.DecodeEvent(ev.Data())
		if err != nil || !bytes.Equal(ev.Data(), m.Data) {
			t.Fatalf("seq %d: data %q is not the stored body", m.Sequence, ev.Data())
		}
		msgID := m.Header.Get(domain.HeaderMsgID)
		switch {
		case ev.ID() != msgID:
			t.Fatalf("seq %d: id %q, Nats-Msg-Id %q", m.Sequence, ev.ID(), msgID)
		case ids[ev.ID()]:
			t.Fatalf("seq %d: id %q twice", m.Sequence, ev.ID())
		case ev.SpecVersion() != "1.0" || ev.Source() != "maintsignals" || ev.DataContentType() != "application/json":
			t.Fatalf("seq %d: attributes %s", m.Sequence, ev.Context)
		case ev.Type() != "io.maintsignals.command."+string(body.Outcome):
			t.Fatalf("seq %d: type %q for outcome %q", m.Sequence, ev.Type(), body.Outcome)
		case ev.Subject() != body.ResourceID:
			t.Fatalf("seq %d: subject %q, resource %q", m.Sequence, ev.Subject(), body.ResourceID)
		case !ev.Time().Equal(body.At):
			t.Fatalf("seq %d: time %s, event at %s", m.Sequence, ev.Time(), body.At)
		}
		ids[ev.ID()] = true
		types[ev.Type()]++
	}
	for _, typ := range []string{domain.CETypeApplied, domain.CETypeRejected, domain.CETypeDuplicate, domain.CETypeDeadLettered} {
		if types[typ] == 0 {
			t.Fatalf("no %s event in the mixed run: %v", typ, types)
		}
	}
	t.Logf("types: %v", types)
}

// storedEvents reads every message of the events stream with its headers.
func storedEvents(t *testing.T, js jetstream.JetStream) []jetstream.RawStreamMsg {
	t.Helper()
	var out []jetstream.RawStreamMsg
	testenv.ReadEntityEvents(t, js, func(m jetstream.Msg) {
		md, _ := m.Metadata()
		out = append(out, jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: md.Sequence.Stream, Header: m.Headers(), Data: m.Data()})
	})
	return out
}
