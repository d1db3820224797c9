// Package testenv starts what the tests need for real: an embedded nats-server with JetStream
// on a temporary directory, provisioned as in production.
package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
)

// Env is a running server with a client connection.
type Env struct {
	Server *embedded.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Dir    string
	Config provision.Config
}

// Option changes the provisioning config of an Env.
type Option func(*provision.Config)

// WithProvision sets the provisioning config.
func WithProvision(f func(*provision.Config)) Option { return Option(f) }

// Start starts an embedded server on t.TempDir(), provisions it and stops it at cleanup.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return StartIn(t, t.TempDir(), opts...)
}

// StartIn is Start on a given store directory (to restart on the same store).
func StartIn(t testing.TB, dir string, opts ...Option) *Env {
	t.Helper()
	return start(t, embedded.Config{Name: "test-0", StoreDir: dir}, opts...)
}

// StartListening is Start with the server also listening on a loopback port, for clients
// that connect over TCP (Env.Server.URL()).
func StartListening(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return start(t, embedded.Config{Name: "test-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:0"}, opts...)
}

// Server starts an embedded server of cfg and stops it when the test ends.
func Server(t testing.TB, cfg embedded.Config) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(t testing.TB, cfg embedded.Config, opts ...Option) *Env {
	t.Helper()
	dir := cfg.StoreDir
	s := Server(t, cfg)
	e := &Env{Server: s, Dir: dir, NC: Connect(t, s), Config: provision.Config{Tick: time.Minute, Webhooks: true}}
	e.JS = JetStream(t, e.NC)
	for _, o := range opts {
		o(&e.Config)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, e.JS, e.Config); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return e
}

// Connect opens another in-process connection, closed at cleanup.
func Connect(t testing.TB, s *embedded.Server) *nats.Conn {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Events reads every outcome event stored under filter (a subject or wildcard), oldest first.
func Events(t testing.TB, js jetstream.JetStream, filter string) []domain.Event {
	t.Helper()
	return readEvents(t, js, filter, domain.DecodeEvent)
}

// PolicyEvents reads every policy command's outcome stored under filter, oldest first.
func PolicyEvents(t testing.TB, js jetstream.JetStream, filter string) []domain.PolicyEvent {
	t.Helper()
	return readEvents(t, js, filter, domain.DecodePolicyEvent)
}

func readEvents[E any](t testing.TB, js jetstream.JetStream, filter string, decode func([]byte) (E, error)) []E {
	t.Helper()
	var out []E
	for _, stream := range EventStreamsFor(filter) {
		out = append(out, readFiltered(t, js, stream, filter, decode)...)
	}
	return out
}

// EventStreamsFor lists the streams that hold events under filter: the cells' whose subjects
// it meets, and MAINT_EVENTS (the policies' and campaigns' events) if it meets those.
func EventStreamsFor(filter string) []string {
	var out []string
	for _, c := range domain.AllCells() {
		if server.SubjectsCollide(filter, c.EventsSubjects()) {
			out = append(out, c.EventsStream())
		}
	}
	if server.SubjectsCollide(filter, domain.PolicyEventPrefix+"*") || server.SubjectsCollide(filter, domain.CampaignEventPrefix+"*") {
		out = append(out, domain.EventsStream)
	}
	return out
}

func readFiltered[E any](t testing.TB, js jetstream.JetStream, stream, filter string, decode func([]byte) (E, error)) []E {
	t.Helper()
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []E
	for {
		batch, err := c.FetchNoWait(1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := decode(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		if n == 0 {
			return out
		}
	}
}

// ReadEntityEvents is ReadStream of every cell's events stream, cell by cell.
func ReadEntityEvents(t testing.TB, js jetstream.JetStream, fn func(jetstream.Msg)) {
	t.Helper()
	for _, s := range domain.EventsStreams() {
		ReadStream(t, js, s, fn)
	}
}

// ReadNotices is ReadStream of every cell's notices stream, cell by cell.
func ReadNotices(t testing.TB, js jetstream.JetStream, fn func(jetstream.Msg)) {
	t.Helper()
	for _, s := range domain.NoticesStreams() {
		ReadStream(t, js, s, fn)
	}
}

// StoredMsgs is how many messages the streams hold in all (0 for one that cannot be read).
func StoredMsgs(js jetstream.JetStream, streams ...string) uint64 {
	var n uint64
	for _, name := range streams {
		if s, err := js.Stream(context.Background(), name); err == nil {
			n += s.CachedInfo().State.Msgs
		}
	}
	return n
}

// JetStream wraps a connection.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// WaitEvents waits until at least n outcome events of the entity key are stored, and returns
// every one of them, oldest first; the test fails if within passes first.
func WaitEvents(t testing.TB, js jetstream.JetStream, key string, n int, within time.Duration) []domain.Event {
	t.Helper()
	var evs []domain.Event
	deadline := time.Now().Add(within)
	for {
		if evs = Events(t, js, domain.EventSubject(key)); len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s: %d outcome events after %s, want %d", key, len(evs), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PutPolicy writes a revision of scope's policy in the policies bucket, as the policies function
// stores one: the document {"scope": scope, <fields>}; fields "" deletes the policy. It returns
// the revision.
func PutPolicy(t testing.TB, js jetstream.JetStream, scope, fields string) uint64 {
	t.Helper()
	m := nats.NewMsg(domain.PolicySubject(domain.MustKey(scope)))
	if fields == "" {
		m.Header.Set(domain.HeaderKVOperation, domain.KVDelete)
	} else {
		m.Data = []byte(`{"scope": "` + scope + `", ` + fields + `}`)
	}
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
