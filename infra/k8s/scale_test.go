package k8s

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	binRemove func()
	errBuild  error
)

// maintctl is the binary the image carries, built once for the package.
func maintctl(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { binPath, binRemove, errBuild = testenv.BuildMaintctl() })
	if errBuild != nil {
		t.Fatal(errBuild)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binRemove != nil {
		binRemove()
	}
	os.Exit(code)
}

// replica is one `maintctl function …` process, as a pod runs it.
type replica struct {
	cmd    *exec.Cmd
	admin  string
	logs   *testenv.SyncBuffer
	exited chan error
}

func startReplica(t *testing.T, url string, args ...string) *replica {
	t.Helper()
	r := &replica{admin: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), logs: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	r.cmd = exec.Command(maintctl(t), append(append([]string{"function"}, args...), "--server", url, "--admin-listen", r.admin)...)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// waitReady polls /readyz as the kubelet does, until 200.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-r.exited:
			t.Fatalf("replica exited before it was ready: %v\n%s", err, r.logs.String())
		default:
		}
		if resp, err := http.Get("http://" + r.admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never ready\n%s", r.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate sends SIGTERM, as the kubelet does, and waits for a clean exit.
func (r *replica) terminate(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0\n%s", err, r.logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit within a minute of SIGTERM\n%s", r.logs.String())
	}
	if !strings.Contains(r.logs.String(), "function stopped") {
		t.Errorf("no clean stop logged:\n%s", r.logs.String())
	}
}

func storedEvents(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	return testenv.StoredMsgs(js, domain.EventsStreams()...)
}

// startServer is a NATS server on loopback TCP with monitoring, provisioned by the dev
// overlay's Job.
func startServer(t *testing.T, tweak func(*provision.Config)) (*embedded.Server, jetstream.JetStream) {
	t.Helper()
	s := testenv.Server(t, embedded.Config{Name: "scale-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), Monitor: "127.0.0.1:0"})
	js := testenv.JetStream(t, testenv.Connect(t, s))
	pc := provisionConfig(t, decodeOverlay(t, "dev"))
	if tweak != nil {
		tweak(&pc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	return s, js
}

func TestScaleFromZeroAndBack(t *testing.T) {
	s, js := startServer(t, nil)
	monitor := strings.TrimPrefix(s.MonitorURL(), "http://")
	scalers := map[string]*kedaScaler{}
	for _, tr := range triggersOf(t, "dev") {
		if tr.Metadata["stream"] != domain.CommandsStream {
			continue
		}
		k, err := newKEDAScaler(http.DefaultClient, tr, monitor)
		if err != nil {
			t.Fatal(err)
		}
		scalers[tr.Name] = k
	}

	// Zero replicas: the verb stores the command, says so and exits 3.
	id := "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/from-zero"
	verb := exec.Command(maintctl(t), "pending", id, "--id", "first-from-zero", "--timeout", "300ms", "--server", s.URL())
	var stderr bytes.Buffer
	verb.Stderr = &stderr
	err := verb.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(stderr.String(), "stored in MAINT_COMMANDS") {
		t.Fatalf("pending with no command function: %v, stderr %q; want exit 3 saying the command is stored", err, stderr.String())
	}
	// The first command wakes the function: its partition's trigger is active.
	waitTotal(t, js, scalers, nil, 1)

	// A load piles up while nothing runs.
	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(5, 6)), 3000, testenv.ResourceIDs("scale", 50))
	first, second := cmds[:1500], cmds[1500:]
	testenv.PublishAll(t, js, first, nil)
	waitTotal(t, js, scalers, nil, int64(1+len(first)))

	// The first replica starts, gets ready, and is stopped by SIGTERM in the middle of the load:
	// while it works on the backlog, the rest is still being published.
	a := startReplica(t, s.URL(), "command")
	a.waitReady(t)
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := 0; i < len(second); i += 100 {
			testenv.PublishAll(t, js, second[i:i+100], nil)
		}
	}()
	for storedEvents(t, js) < 300 {
		time.Sleep(5 * time.Millisecond)
	}
	a.terminate(t)
	atStop := storedEvents(t, js)
	<-published
	t.Logf("replica A applied %d of %d commands before SIGTERM ended it", atStop, 1+len(cmds))

	// A replica started afterwards applies everything left, in order per entity, each once.
	b := startReplica(t, s.URL(), "command")
	b.waitReady(t)
	counts := testenv.Verify(t, js, append([]domain.Command{{ID: "first-from-zero", ResourceID: id, Task: domain.TaskPending}}, cmds...), 2*time.Minute)
	if counts.Lost != 0 || counts.MultipleOutcomes != 0 {
		t.Fatalf("after a SIGTERM mid-load: %s", counts)
	}
	t.Logf("%s", counts)
	// Nothing waits any more: KEDA lets the function go back to zero.
	waitIdle(t, scalers)
	b.terminate(t)
}

func TestEmitterStartedAfterMissedTicksEmitsOnce(t *testing.T) {
	s, js := startServer(t, func(c *provision.Config) { c.Tick = time.Second })
	// One tracked entity, so that an emission has points.
	stop := runCommand(t, js)
	one := []domain.Command{{ID: "tracked-1", ResourceID: "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/ticks", Task: domain.TaskPending}}
	testenv.PublishAll(t, js, one, nil)
	testenv.Verify(t, js, one, 30*time.Second)
	stop()

	// Ticks pile up while no emitter runs, on every shard's consumer.
	cons, err := js.Consumer(context.Background(), domain.ScheduleStream, domain.EmitterShardConsumer(0))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ci, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ci.NumPending >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks do not pile up: %d pending", ci.NumPending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// No new ticks from here on (the schedule moves to an hour), so every run counted below
	// comes from the missed ones.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc := provisionConfig(t, decodeOverlay(t, "dev"))
	pc.Tick = time.Hour
	if _, err := provision.Run(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missed := ci.NumPending

	recv := otlpreceiver.Start(t)
	recv.SetEnv(t, "grpc")
	e := startReplica(t, s.URL(), "emitter")
	e.waitReady(t)
	for s := range pc.Shards {
		cons, err := js.Consumer(ctx, domain.ScheduleStream, domain.EmitterShardConsumer(s))
		if err != nil {
			t.Fatal(err)
		}
		for {
			ci, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ci.NumPending == 0 && ci.NumAckPending == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the emitter did not take the missed ticks of shard %d: %d pending, %d in hand", s, ci.NumPending, ci.NumAckPending)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	e.terminate(t) // flushes what it has
	// One emission of each shard: the one entity's points once, each shard's fleet view once.
	status, fleets := 0, 0
	for _, ex := range recv.Exports() {
		if ex.Has("cluster.maintenance.status") {
			status++
		}
		if ex.Has("cluster.maintenance.entities") {
			fleets++
		}
	}
	if status != 1 || fleets != pc.Shards {
		t.Fatalf("%d missed ticks gave %d emissions of the entity and %d fleet views, want 1 and %d", missed, status, fleets, pc.Shards)
	}
}
