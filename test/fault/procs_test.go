package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// Size of every load: the floor set by the issue for a fault test.
const (
	loadCommands = 5000
	loadEntities = 50
	tick         = time.Second
)

// needBinary skips a process scenario under -short (TestMain then builds nothing).
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || bin == "" {
		t.Skip("fault scenario with maintctl processes")
	}
}

// proc is one maintctl process.
type proc = testenv.Proc

// procEnv is the environment of every process (testenv.ProcEnv).
func procEnv(extra ...string) []string { return testenv.ProcEnv(extra...) }

// otelEnv points a process's OTLP export at the receiver over gRPC, with replica=name as a
// resource attribute (kept on emissions, which carry no service.instance.id).
func otelEnv(r *otlpreceiver.Receiver, replica string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.GRPCEndpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_RESOURCE_ATTRIBUTES=replica=" + replica,
	}
}

// startProc starts `maintctl args...` with env; name labels its log files.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return testenv.StartProc(t, name, cmd)
}

// startFunction runs `maintctl function NAME --server url` and waits until it serves.
func startFunction(t *testing.T, name, function, url string, env []string) *proc {
	t.Helper()
	args := []string{"function", function, "--server", url}
	if function == "emitter" {
		args = append(args, "--log-level", "debug")
	}
	p := startProc(t, name, env, args...)
	p.WaitFor("function started", 30*time.Second)
	return p
}

// stack is an embedded nats-server listening on loopback, provisioned with a 1 s tick, and
// the test's own in-process connection to it.
type stack struct {
	srv *embedded.Server
	url string
	js  jetstream.JetStream
}

func startStack(t *testing.T) *stack { return startStackTicking(t, tick) }

// startStackTicking is startStack with another tick.
func startStackTicking(t *testing.T, every time.Duration) *stack {
	t.Helper()
	srv := testenv.Server(t, embedded.Config{Name: "fault-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	st := &stack{srv: srv, url: srv.URL(), js: testenv.JetStream(t, testenv.Connect(t, srv))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The default ack wait is 30 s; 5 s keeps a killed replica's held commands from stalling
	// their partitions for long, as in scenario a.
	if _, err := provision.Run(ctx, st.js, provision.Config{Tick: every, AckWait: 5 * time.Second}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return st
}

// loadCmds is the load of a scenario: 5,000 random commands over 50 entities.
func loadCmds(seed uint64, prefix string) []domain.Command {
	return testenv.RandomCommands(rand.New(rand.NewPCG(seed, 7)), loadCommands, testenv.ResourceIDs(prefix, loadEntities))
}

// streamMsgs is the number of messages in a stream (-1 when it cannot be read).
func streamMsgs(js jetstream.JetStream, streams ...string) int {
	return int(testenv.StoredMsgs(js, streams...))
}

// waitEvents waits (up to timeout) until the events stream holds at least n messages and
// reports how many it holds.
func waitEvents(js jetstream.JetStream, n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		got := streamMsgs(js, domain.EventsStreams()...)
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// emission is the whole emission of one tick (every shard's requests, merged).
type emission struct {
	tick     time.Time       // the tick's time, which its points carry
	at       time.Time       // when its last request arrived
	seq      int             // the Seq of its last request
	replica  string          // the replicas that sent it (the replica resource attribute), joined by "+"
	replicas map[string]bool // the same, as a set
	export   otlpreceiver.Export
}

const statusMetric = "cluster.maintenance.status"

// emissions lists the whole emissions received (every shard's fleet view came), by arrival.
func emissions(r *otlpreceiver.Receiver) []emission {
	var out []emission
	for _, e := range r.Emissions(domain.DefaultShards) {
		em := emission{tick: e.Tick, at: e.At, seq: e.Seq, replica: strings.Join(e.Replicas, "+"), replicas: map[string]bool{}, export: e.Export}
		for _, rep := range e.Replicas {
			em.replicas[rep] = true
		}
		out = append(out, em)
	}
	return out
}

// maxGap is the longest time between successive emissions (and the two emissions around it).
func maxGap(ems []emission) (time.Duration, int) {
	var gap time.Duration
	at := -1
	for i := 1; i < len(ems); i++ {
		if d := ems[i].at.Sub(ems[i-1].at); d > gap {
			gap, at = d, i
		}
	}
	return gap, at
}

// awaitEmission waits for the first whole emission completed after the request numbered after.
func awaitEmission(t *testing.T, r *otlpreceiver.Receiver, after int, timeout time.Duration) (emission, error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, e := range emissions(r) {
			if e.seq > after {
				return e, nil
			}
		}
		if time.Now().After(deadline) {
			return emission{}, fmt.Errorf("no whole emission after request #%d within %s", after, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// currentStates are the emitted states of an emission: entity → the state whose point is 1.
func currentStates(e otlpreceiver.Export) map[string]string {
	out := map[string]string{}
	for _, p := range e.Find(statusMetric, nil) {
		if p.Value == 1 {
			out[p.Attrs["cloud.resource_id"]] = p.Attrs["cluster.maintenance.state"]
		}
	}
	return out
}

// stateAttr is the value of cluster.maintenance.state for a state (README, Metrics).
func stateAttr(s domain.State) string {
	switch s {
	case domain.StateNone:
		return "none"
	case domain.StatePending:
		return "pending"
	case domain.StatePlanned:
		return "planned"
	case domain.StateUnplanned:
		return "unplanned"
	case domain.StateCustomerActionNeeded:
		return "customer_action_needed"
	}
	return "?" + string(s)
}

// connectURL opens a TCP client connection that reconnects for ever, closed at cleanup.
func connectURL(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// countsLine is the summary line of a scenario.
func countsLine(scenario string, c testenv.Counts, gap string) string {
	return fmt.Sprintf("scenario %s: sent %d, applied %d, rejected %d, dead-lettered %d, lost %d; signal absent for at most %s",
		scenario, c.Sent, c.Applied, c.Rejected, c.DeadLettered, c.Lost, gap)
}

// commandEnv makes a command process export its SDK metrics to r every half second, as
// replica name, so that the test sees how many commands each replica processed.
func commandEnv(r *otlpreceiver.Receiver, name string) []string {
	return procEnv(append(otelEnv(r, name), "OTEL_METRIC_EXPORT_INTERVAL=500")...)
}

// processed is, per replica, the messages it processed per consumer so far (the latest
// cumulative count of messaging.process.duration).
func processed(r *otlpreceiver.Receiver) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, p := range otlpreceiver.Find(r.Points(), "messaging.process.duration", nil) {
		rep, cons := p.Resource["replica"], p.Attrs["messaging.consumer.group.name"]
		if out[rep] == nil {
			out[rep] = map[string]uint64{}
		}
		out[rep][cons+"/"+p.Attrs["maint.result"]] = p.Count
	}
	return out
}

// totals sums processed per replica over its consumers.
func totals(m map[string]map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for rep, byCons := range m {
		for _, n := range byCons {
			out[rep] += n
		}
	}
	return out
}

// collectTB is the testing.TB of a goroutine that may outlive its test: it keeps the errors
// reported to it for the test to report, and never calls the test itself.
type collectTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (c *collectTB) Helper() {}

func (c *collectTB) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *collectTB) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}
