package command_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// startReplicas runs n replicas of the command function until the test ends, or until the
// returned stop is called.
func startReplicas(t *testing.T, env *testenv.Env, n int, cfg command.Config, wrap ...func(function.Handler) function.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		fn, err := command.New(ctx, env.JS, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rc := fn.RuntimeConfig()
		rc.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond}
		for _, w := range wrap {
			rc.Handler = w(rc.Handler)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := function.Run(ctx, env.JS, rc); err != nil {
				t.Errorf("replica: %v", err)
			}
		}()
	}
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// send publishes a command as an integrator would: JSON body, id also in Nats-Msg-Id.
func send(t *testing.T, js jetstream.JetStream, cmd domain.Command) *jetstream.PubAck {
	t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return sendRaw(t, js, domain.MustKey(cmd.ResourceID), cmd.ID, b)
}

func sendRaw(t *testing.T, js jetstream.JetStream, key, msgID string, body []byte) *jetstream.PubAck {
	t.Helper()
	m := nats.NewMsg(domain.CommandSubject(key))
	m.Data = body
	if msgID != "" {
		m.Header.Set(domain.HeaderMsgID, msgID)
	}
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ack
}

// events reads every outcome event of key, waiting until there are at least want of them.
func events(t *testing.T, js jetstream.JetStream, key string, want int) []domain.Event {
	t.Helper()
	return testenv.WaitEvents(t, js, key, want, 20*time.Second)
}

func readEvents(t *testing.T, js jetstream.JetStream, filter string) []domain.Event {
	t.Helper()
	return testenv.Events(t, js, filter)
}

func record(t *testing.T, env *testenv.Env, key string) (domain.Record, uint64) {
	t.Helper()
	st, err := store.Open(context.Background(), env.JS)
	if err != nil {
		t.Fatal(err)
	}
	r, rev, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r, rev
}

// flakyEvents fails the first n publishes: the record is written, the event is not.
type flakyEvents struct {
	command.Publisher
	mu sync.Mutex
	n  int
}

func (f *flakyEvents) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected: events stream unreachable")
	}
	return f.Publisher.PublishMsg(ctx, m, opts...)
}

// flakyRecords fails the first n reads (or every read when n < 0).
type flakyRecords struct {
	command.Records
	mu sync.Mutex
	n  int
}

func (f *flakyRecords) Get(ctx context.Context, key string) (domain.Record, uint64, error) {
	f.mu.Lock()
	fail := f.n != 0
	if f.n > 0 {
		f.n--
	}
	f.mu.Unlock()
	if fail {
		return domain.Record{}, 0, errors.New("injected: bucket unreachable")
	}
	return f.Records.Get(ctx, key)
}

const cluster = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
