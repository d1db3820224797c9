package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// randomCommands makes n commands over the given entities with every task, including ones the
// state machine will refuse.
func randomCommands(rng *rand.Rand, n int, ids []string) []domain.Command {
	cmds := make([]domain.Command, n)
	for i := range cmds {
		c := domain.Command{
			ID:         fmt.Sprintf("cmd-%05d", i),
			ResourceID: ids[rng.IntN(len(ids))],
			Task:       domain.Tasks[rng.IntN(len(domain.Tasks))],
			Force:      rng.IntN(8) == 0,
			Actor:      "order-test",
		}
		switch c.Task {
		case domain.TaskUpdateFailed:
			c.Error = fmt.Sprintf("failure %d", i)
		case domain.TaskPending:
			if rng.IntN(2) == 0 {
				s := time.Date(2026, 12, 1+rng.IntN(20), 0, 0, 0, 0, time.UTC)
				c.Window = &domain.Window{Start: s, End: s.Add(time.Duration(1+rng.IntN(8)) * time.Hour)}
				c.Reason = "announced"
			}
		}
		cmds[i] = c
	}
	return cmds
}

// TestHandle_FourReplicasKeepPerEntityOrder publishes 2,000 random commands over 20 entities as
// fast as it can, with four replicas consuming, and checks every entity's final record and
// sequence of outcomes against a sequential application through the pure state machine, in
// the order the stream stored the commands.
func TestHandle_FourReplicasKeepPerEntityOrder(t *testing.T) {
	const n, entities = 2000, 20
	env := testenv.Start(t)
	startReplicas(t, env, 4, command.Config{})

	ids := make([]string, entities)
	for i := range ids {
		ids[i] = fmt.Sprintf("/subscriptions/sub/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/Order.%02d", i)
	}
	cmds := randomCommands(rand.New(rand.NewPCG(7, 11)), n, ids)
	pub := testenv.Connect(t, env.Server)
	pjs, _ := jetstream.New(pub)
	futures := make([]jetstream.PubAckFuture, 0, n)
	for _, c := range cmds {
		b, _ := json.Marshal(c)
		m := nats.NewMsg(domain.CommandSubject(domain.MustKey(c.ResourceID)))
		m.Data = b
		m.Header.Set(domain.HeaderMsgID, c.ID)
		f, err := pjs.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish ack timeout")
		}
	}
	waitEvents(t, env.JS, n)

	// The order the stream stored the commands in, per entity.
	byKey := map[string][]domain.Command{}
	cons, err := env.JS.OrderedConsumer(context.Background(), domain.CommandsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var c domain.Command
		if err := json.Unmarshal(m.Data(), &c); err != nil {
			t.Fatal(err)
		}
		key := domain.KeyFromSubject(m.Subject())
		byKey[key] = append(byKey[key], c)
	}

	var applied, rejected int
	for _, id := range ids {
		key := domain.MustKey(id)
		model := domain.Record{State: domain.StateNone}
		var want []outcome
		for _, c := range byKey[key] {
			next, tr, rej := domain.Apply(model, c, time.Now())
			if rej != nil {
				want = append(want, outcome{c.ID, domain.OutcomeRejected, model.State, model.State, rej.Code})
				rejected++
				continue
			}
			applied++
			want = append(want, outcome{c.ID, domain.OutcomeApplied, tr.From, tr.To, ""})
			model = next
		}
		evs := readEvents(t, env.JS, domain.EventSubject(key))
		if len(evs) != len(want) {
			t.Fatalf("%s: %d events, want %d", key, len(evs), len(want))
		}
		for i, ev := range evs {
			got := outcome{ev.CommandID, ev.Outcome, ev.From, ev.To, ev.Code}
			if got != want[i] {
				t.Fatalf("%s: event %d = %+v, want %+v (sequential model)", key, i, got, want[i])
			}
		}
		rec, _ := record(t, env, key)
		if rec.State != model.State || rec.Updating != model.Updating || rec.Task != model.Task ||
			rec.LastError != model.LastError || rec.Reason != model.Reason || (rec.Window == nil) != (model.Window == nil) {
			t.Fatalf("%s: record %+v, model %+v", key, rec, model)
		}
		if len(byKey[key]) > 0 && model.ResourceID != "" && rec.LastCommandID != lastApplied(want) {
			t.Fatalf("%s: lastCommandId %s, want %s", key, rec.LastCommandID, lastApplied(want))
		}
	}
	t.Logf("%d commands: %d applied, %d rejected", n, applied, rejected)
	if applied == 0 || rejected == 0 {
		t.Fatalf("the random mix must exercise both paths: %d applied, %d rejected", applied, rejected)
	}
}

type outcome struct {
	ID       string
	Outcome  domain.Outcome
	From, To domain.State
	Code     domain.Code
}

func lastApplied(outs []outcome) string {
	for i := len(outs) - 1; i >= 0; i-- {
		if outs[i].Outcome == domain.OutcomeApplied {
			return outs[i].ID
		}
	}
	return ""
}

func waitEvents(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	s, err := js.Stream(context.Background(), domain.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events after 60s, want %d", info.State.Msgs, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
