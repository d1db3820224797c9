// Package poison feeds the checked-in corpus of bad commands through the real command function
// and checks that each gets its documented rejection, with no retry, while good commands
// around them are applied.
package poison

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

const resource = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-poison/providers/Microsoft.RedHatOpenShift/openShiftClusters/poison"

type expectation struct {
	File     string  `json:"file"`
	Code     string  `json:"code"`
	Target   string  `json:"target"`
	MsgID    *string `json:"msgId"`
	OtherKey bool    `json:"otherKey"`
}

func TestCorpus_EveryPoisonGetsItsRejectionAndGoodCommandsApply(t *testing.T) {
	raw, err := os.ReadFile("testdata/expect.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus map[string]expectation
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := command.Run(ctx, env.JS, command.Config{}); err != nil {
				t.Error(err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	key := domain.MustKey(resource)
	publish := func(body []byte, msgID string) uint64 {
		t.Helper()
		m := nats.NewMsg(domain.CommandSubject(key))
		m.Data = body
		if msgID != "" {
			m.Header.Set(domain.HeaderMsgID, msgID)
		}
		ack, err := env.JS.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		return ack.Sequence
	}
	good := func(id string, task domain.Task) []byte {
		b, _ := json.Marshal(domain.Command{ID: id, ResourceID: resource, Task: task})
		return b
	}
	before := publish(good("good-before", domain.TaskPending), "good-before")
	names := make([]string, 0, len(corpus))
	for n := range corpus {
		names = append(names, n)
	}
	sort.Strings(names)
	seqs := map[uint64]string{}
	for _, n := range names {
		c := corpus[n]
		body, err := os.ReadFile(filepath.Join("testdata", c.File))
		if err != nil {
			t.Fatal(err)
		}
		id := ""
		if c.MsgID != nil {
			id = *c.MsgID
		}
		seqs[publish(body, id)] = n
	}
	after := publish(good("good-after", domain.TaskCustomerActionNeeded), "good-after")
	// The same id again, past the stream's de-duplication (no header): a duplicate, not a change.
	dup := publish(good("good-before", domain.TaskPending), "")

	want := len(corpus) + 3
	bySeq := map[uint64]domain.Event{}
	deadline := time.Now().Add(30 * time.Second)
	for len(bySeq) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes after 30s, want %d", len(bySeq), want)
		}
		for _, ev := range testenv.Events(t, env.JS, ">") {
			bySeq[ev.CommandSeq] = ev
		}
		time.Sleep(50 * time.Millisecond)
	}
	for seq, name := range seqs {
		c := corpus[name]
		t.Run(name, func(t *testing.T) {
			ev := bySeq[seq]
			if ev.Outcome != domain.OutcomeRejected || string(ev.Code) != c.Code || ev.Target != c.Target {
				t.Fatalf("outcome %s %s target %q (%s), want rejected %s target %q", ev.Outcome, ev.Code, ev.Target, ev.Message, c.Code, c.Target)
			}
			if ev.Message == "" {
				t.Fatal("rejection without a message")
			}
		})
	}
	if ev := bySeq[before]; ev.Outcome != domain.OutcomeApplied {
		t.Errorf("good command before the poison: %+v", ev)
	}
	if ev := bySeq[after]; ev.Outcome != domain.OutcomeApplied || ev.From != domain.StatePending || ev.To != domain.StateCustomerActionNeeded {
		t.Errorf("good command after the poison: %+v", ev)
	}
	if ev := bySeq[dup]; ev.Outcome != domain.OutcomeDuplicate {
		t.Errorf("repeated id: %+v", ev)
	}
	st, _ := store.Open(context.Background(), env.JS)
	rec, rev, err := st.Get(context.Background(), key)
	if err != nil || rec.State != domain.StateCustomerActionNeeded || rev != 2 {
		t.Errorf("record %+v rev %d (%v): want only the two good commands written", rec, rev, err)
	}
	// Never a retry loop: nothing was redelivered and nothing dead-lettered.
	s, _ := env.JS.Stream(context.Background(), domain.CommandsStream)
	for name := range s.ConsumerNames(context.Background()).Name() {
		c, _ := env.JS.Consumer(context.Background(), domain.CommandsStream, name)
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumRedelivered != 0 || info.NumAckPending != 0 {
			t.Errorf("consumer %s: %d redelivered, %d pending", name, info.NumRedelivered, info.NumAckPending)
		}
	}
	dlq, _ := env.JS.Stream(context.Background(), domain.DLQStream)
	if info, _ := dlq.Info(context.Background()); info.State.Msgs != 0 {
		t.Errorf("%d dead letters; bad input is a rejection, not a dead letter", info.State.Msgs)
	}
}
