package admin_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/admin"
	"maintsignals/shared/embedded"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

var quiet = testenv.Quiet()

// probe GETs path on the admin server and returns the status code and body.
func probe(t *testing.T, srv *admin.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + srv.Addr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe polls path until it answers code (the transitions happen in other goroutines).
func waitProbe(t *testing.T, srv *admin.Server, path string, code int, bodyPart string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, body := probe(t, srv, path)
		if got == code && strings.Contains(body, bodyPart) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %d %q, want %d containing %q", path, got, body, code, bodyPart)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type fixture struct {
	srv    *embedded.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	adm    *admin.Server
	status *function.Status
}

func start(t *testing.T) *fixture {
	t.Helper()
	s := testenv.Server(t, embedded.Config{Name: "admin-0", StoreDir: t.TempDir()})
	nc, err := s.Connect(nats.ReconnectWait(10 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"w1", "w2"} {
		if _, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: c, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "work." + c}); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{srv: s, nc: nc, js: js, status: function.NewStatus()}
	f.adm, err = admin.Start(admin.Config{Listen: "127.0.0.1:0", Status: f.status, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.adm.Close(context.Background()) })
	return f
}

// run runs a function on consumers w1 and w2 whose handler waits for release when a message
// says "block"; it returns a stop that cancels it (as SIGTERM does) and one that waits for it.
func (f *fixture) run(t *testing.T, release <-chan struct{}, handling chan<- struct{}) (cancel, wait func()) {
	t.Helper()
	ctx, stop := context.WithCancel(function.WithStatus(context.Background(), f.status))
	done := make(chan error, 1)
	go func() {
		done <- function.Run(ctx, f.js, function.Config{
			Name: "work", Stream: "WORK", Consumers: []string{"w1", "w2"}, Logger: quiet,
			Handler: func(context.Context, function.Message) error {
				handling <- struct{}{}
				<-release
				return nil
			},
		})
	}()
	waited := false
	wait = func() {
		if waited {
			return
		}
		waited = true
		if err := <-done; err != nil {
			t.Errorf("function: %v", err)
		}
	}
	t.Cleanup(func() { stop(); wait() })
	return stop, wait
}

func TestLivenessNeverDependsOnNATS(t *testing.T) {
	f := start(t)
	// Not connected yet: alive, not ready.
	if code, _ := probe(t, f.adm, "/livez"); code != http.StatusOK {
		t.Fatalf("livez before connecting = %d, want 200", code)
	}
	waitProbe(t, f.adm, "/readyz", http.StatusServiceUnavailable, "not connected to NATS yet")

	f.adm.Attach(f.nc, f.js)
	waitProbe(t, f.adm, "/readyz", http.StatusServiceUnavailable, "no function serves yet")
	release := make(chan struct{})
	close(release)
	f.run(t, release, make(chan struct{}, 100))
	waitProbe(t, f.adm, "/readyz", http.StatusOK, "ready")

	// The server goes away: not ready, still alive (a restart would not bring NATS back).
	f.srv.Stop()
	t.Cleanup(f.nc.Close) // before the function's cleanup: its drain need not wait for the server
	waitProbe(t, f.adm, "/readyz", http.StatusServiceUnavailable, "not connected to NATS (reconnecting)")
	if code, body := probe(t, f.adm, "/livez"); code != http.StatusOK {
		t.Fatalf("livez during a NATS outage = %d %q, want 200", code, body)
	}
}

func TestReadinessFailsWhenAConsumerIsDeleted(t *testing.T) {
	f := start(t)
	f.adm.Attach(f.nc, f.js)
	release := make(chan struct{})
	close(release)
	f.run(t, release, make(chan struct{}, 100))
	waitProbe(t, f.adm, "/readyz", http.StatusOK, "ready")

	if err := f.js.DeleteConsumer(context.Background(), "WORK", "w2"); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, f.adm, "/readyz", http.StatusServiceUnavailable, "consumer WORK/w2 not found")

	// Provisioning puts it back: ready again.
	if _, err := f.js.CreateOrUpdateConsumer(context.Background(), "WORK", jetstream.ConsumerConfig{Durable: "w2", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "work.w2"}); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, f.adm, "/readyz", http.StatusOK, "ready")
}

func TestReadinessFailsWhileDraining(t *testing.T) {
	f := start(t)
	f.adm.Attach(f.nc, f.js)
	release := make(chan struct{})
	handling := make(chan struct{}, 1)
	cancel, wait := f.run(t, release, handling)
	waitProbe(t, f.adm, "/readyz", http.StatusOK, "ready")

	if _, err := f.js.Publish(context.Background(), "work.w1", []byte("block")); err != nil {
		t.Fatal(err)
	}
	<-handling
	cancel() // what SIGTERM does to maintctl function
	waitProbe(t, f.adm, "/readyz", http.StatusServiceUnavailable, "function work is draining")
	if code, _ := probe(t, f.adm, "/livez"); code != http.StatusOK {
		t.Fatalf("livez while draining = %d, want 200", code)
	}
	close(release)
	wait()
	// The message in hand was finished, not abandoned.
	info, err := f.js.Consumer(context.Background(), "WORK", "w1")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := info.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumAckPending != 0 || ci.NumPending != 0 || ci.AckFloor.Stream != 1 {
		t.Fatalf("after the drain: pending %d, ack pending %d, ack floor %d; want the message acknowledged", ci.NumPending, ci.NumAckPending, ci.AckFloor.Stream)
	}
}

func TestMetricsServedOnlyWhenThereIsAPage(t *testing.T) {
	f := start(t)
	if code, body := probe(t, f.adm, "/metrics"); code != http.StatusNotFound || !strings.Contains(body, "OTLP") {
		t.Fatalf("metrics without a page = %d %q, want 404 saying where metrics go", code, body)
	}
	f.adm.SetMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") }))
	if code, body := probe(t, f.adm, "/metrics"); code != http.StatusOK || body != "up 1" {
		t.Fatalf("metrics = %d %q", code, body)
	}
}

func TestStartFailsOnAnAddressInUse(t *testing.T) {
	f := start(t)
	_, err := admin.Start(admin.Config{Listen: f.adm.Addr(), Status: function.NewStatus()})
	if err == nil || !strings.Contains(err.Error(), "admin listen") {
		t.Fatalf("second admin on %s: err = %v, want a listen error", f.adm.Addr(), err)
	}
	if _, err := admin.Start(admin.Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("admin without a Status started")
	}
}
