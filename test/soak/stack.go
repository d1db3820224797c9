package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// natsRole is the role of the nats-server process among the functions'.
const natsRole = "nats"

// functions are the roles run as `maintctl function NAME`, one process each: the whole stack.
var functions = []string{"command", "emitter", "notices", "webhook", "policies", "subscriptions", "campaign", "web"}

// stackConfig is how the soak runs the stack.
type stackConfig struct {
	maintctl, natsServer string // binaries
	tick                 time.Duration
	forgetAfter          time.Duration // the command function's tombstone lifetime
	markerTTL            time.Duration // the buckets' marker lifetime
	plantLeak            bool
	webhooks             bool // the webhook feed and the webhook function
	receiver             *otlpreceiver.Receiver
}

// stack is the nats-server process and a process per function. A killed process is started
// again at once, as a pod restarts; each start is a new lifetime of its role.
type stack struct {
	t    *testenv.Program
	cfg  stackConfig
	dir  string // the server's store
	port int

	mu    sync.Mutex
	procs map[string]*testenv.Proc
	lives map[string]int // role -> lifetime, from 1
}

// startStack starts the server, provisions it and starts every function.
func startStack(ctx context.Context, t *testenv.Program, cfg stackConfig) (*stack, jetstream.JetStream, error) {
	s := &stack{t: t, cfg: cfg, dir: t.TempDir(), port: testenv.FreePort(t),
		procs: map[string]*testenv.Proc{}, lives: map[string]int{}}
	if err := s.startNATS(); err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(s.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// A short ack wait makes the pinned TTL 3 s: a killed replica's shards and partitions
	// move within a tick.
	if _, err := provision.Run(pctx, js, provision.Config{Tick: cfg.tick, AckWait: 3 * time.Second, Webhooks: cfg.webhooks}); err != nil {
		return nil, nil, fmt.Errorf("provision: %w", err)
	}
	// Time compressed for what leaves the buckets as well: the markers of expired tombstones
	// live an hour in production.
	if err := testenv.UpdateRecordsStreams(pctx, js, func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = cfg.markerTTL }); err != nil {
		return nil, nil, fmt.Errorf("marker TTL: %w", err)
	}
	for _, role := range s.functions() {
		s.startFunction(role)
	}
	return s, js, nil
}

// functions are the roles of the stack's functions.
func (s *stack) functions() []string {
	if s.cfg.webhooks {
		return functions
	}
	var out []string
	for _, f := range functions {
		if f != "webhook" {
			out = append(out, f)
		}
	}
	return out
}

func (s *stack) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// natsConf is the server's configuration: production's (infra/nats/single.conf) without TLS
// and users, which a soak does not concern.
const natsConf = `server_name: "soak-0"
listen: "127.0.0.1:%d"
max_payload: 1048576
ping_interval: "2s"
ping_max: 3
jetstream {
  store_dir: %q
  sync_interval: "always"
}
`

// startNATS starts a nats-server on the store and port of the stack and waits until it
// accepts connections.
func (s *stack) startNATS() error {
	s.nextLife(natsRole)
	conf := filepath.Join(s.dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, natsConf, s.port, filepath.Join(s.dir, "store")), 0o600); err != nil {
		return err
	}
	s.start(natsRole, exec.Command(s.cfg.natsServer, "-c", conf))
	// Restoring the streams after a SIGKILL can take a while: the soak measures it.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server not listening within 3 minutes: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startFunction starts `maintctl function ROLE`, exporting its metrics to the receiver every
// tick with its role and lifetime as resource attributes, and waits until it serves.
func (s *stack) startFunction(role string) {
	args := []string{"function", role, "--server", s.url()}
	switch role {
	case "command":
		args = append(args, "--forget-after", s.cfg.forgetAfter.String())
	case "emitter":
		if s.cfg.plantLeak {
			args = append(args, "--test-plant-leak")
		}
	case "web":
		args = append(args, "--web-listen", "127.0.0.1:0")
	}
	cmd := exec.Command(s.cfg.maintctl, args...)
	life := s.nextLife(role)
	cmd.Env = testenv.ProcEnv(
		"OTEL_EXPORTER_OTLP_ENDPOINT="+s.cfg.receiver.GRPCEndpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_METRIC_EXPORT_INTERVAL="+strconv.FormatInt(s.cfg.tick.Milliseconds(), 10),
		fmt.Sprintf("OTEL_RESOURCE_ATTRIBUTES=replica=%s,soak.life=%d", role, life))
	p := s.start(role, cmd)
	ready := "function started"
	switch role {
	case "web":
		ready = "web view listening"
	case "webhook":
		// No subscriptions here: it follows the self-service ones, and has no consumer yet.
		ready = "self-service subscriptions followed"
	}
	p.WaitFor(ready, time.Minute)
}

func (s *stack) nextLife(role string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lives[role]++
	return s.lives[role]
}

// start starts cmd as the process of role; a process of the soak dies with it.
func (s *stack) start(role string, cmd *exec.Cmd) *testenv.Proc {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	name := fmt.Sprintf("%s-%d", role, s.lives[role])
	s.mu.Unlock()
	p := testenv.StartProc(s.t, name, cmd)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[role] = p
	return p
}

// kill sends SIGKILL to the process of role and starts it again at once.
func (s *stack) kill(role string) error {
	s.mu.Lock()
	p := s.procs[role]
	s.mu.Unlock()
	p.Kill()
	if role == natsRole {
		return s.startNATS()
	}
	s.startFunction(role)
	return nil
}

// running is, per role, the pid and lifetime of its process now.
func (s *stack) running() map[string]procRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]procRef{}
	for role, p := range s.procs {
		out[role] = procRef{pid: p.Cmd.Process.Pid, life: s.lives[role]}
	}
	return out
}

// procRef is a process of a role: its pid and lifetime.
type procRef struct{ pid, life int }
