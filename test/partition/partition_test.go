package partition

// The partition scenarios: a 3-node nats-server cluster (sync before acknowledging), two
// command and two emitter replicas and the load publishers, each process in a network
// namespace of its own, under a steady load of about 100 commands a second over 30 entities;
// one link is cut and healed (or flaps) while the load runs. Each run reports what became of
// every command and fails when a command is lost or has more than one effect or outcome.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

const (
	pubRate    = 50.0 // commands per second of each of the two steady publishers
	loadFor    = 35 * time.Second
	entities   = 30
	tick       = time.Second
	ackTimeout = 5 * time.Second // a publisher's wait for each PubAck
	// cutFor is longer than the commands' ack wait (5 s), so that a cut-off replica's
	// commands are redelivered to the other while it may still hold them.
	cutFor    = 12 * time.Second
	faultAt   = 8 * time.Second
	auditWait = 2 * time.Minute
)

// runs is how many times each scenario runs (MAINT_PARTITION_RUNS, default 3): a race shows
// in some runs only.
func runs(t *testing.T) int {
	if v := os.Getenv("MAINT_PARTITION_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MAINT_PARTITION_RUNS=%q: want a positive number", v)
		}
		return n
	}
	return 3
}

// scenario is one partition: prepare runs once the stack is up and returns the publishers'
// server lists; fault runs from the start of the load and cuts and heals links.
type scenario struct {
	id      string // in report lines and command ids
	name    string
	about   string
	prepare func(s *stack) (pubs []pubSpec)
	fault   func(s *stack)
}

type pubSpec struct {
	name    string
	servers []*Node
	rate    float64
}

func TestPartition(t *testing.T) {
	needSuite(t)
	n := runs(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for i := 1; i <= n; i++ {
				t.Run("run"+strconv.Itoa(i), func(t *testing.T) { runScenario(t, sc, i) })
			}
		})
	}
}

// bothWays is the two steady publishers: one tries the nodes in order, the other in reverse,
// so that they sit on different nodes (on both sides of a cut node).
func bothWays(s *stack, first *Node) []pubSpec {
	order := []*Node{first}
	for _, nd := range s.cluster.Nodes {
		if nd != first {
			order = append(order, nd)
		}
	}
	rev := make([]*Node, len(order))
	for i, nd := range order {
		rev[len(order)-1-i] = nd
	}
	return []pubSpec{{name: "pub-1", servers: order, rate: pubRate}, {name: "pub-2", servers: rev, rate: pubRate}}
}

var scenarios = []scenario{
	{
		id:    "a",
		name:  "a_leader_node_isolated",
		about: "the node leading the commands stream and the bucket is cut off for 12 s, then healed",
		prepare: func(s *stack) []pubSpec {
			leader := s.leaderNode(domain.CommandsStream)
			for _, cell := range domain.AllCells() {
				if err := MoveLeader(context.Background(), s.nc, s.js, cell.RecordsStream(), leader.Name); err != nil {
					s.t.Fatal(err)
				}
			}
			s.victim = leader.Host
			s.t.Logf("%s leads %s and the records' buckets", leader.Name, domain.CommandsStream)
			return bothWays(s, leader)
		},
		fault: func(s *stack) {
			s.cut(s.victim, faultAt, cutFor)
		},
	},
	{
		id:    "b8",
		name:  "b_command_replica_cut_8s",
		about: "one command replica is cut off for 8 s (longer than the 5 s ack wait, shorter than the servers' 10 s write deadline, so its connection survives), then healed",
		prepare: func(s *stack) []pubSpec {
			s.victim = s.commands[0].host
			return bothWays(s, s.cluster.Nodes[0])
		},
		fault: func(s *stack) {
			s.cut(s.victim, faultAt, 8*time.Second)
		},
	},
	{
		id:    "b12",
		name:  "b_command_replica_cut_12s",
		about: "one command replica is cut off for 12 s (longer than the 5 s ack wait and the servers' 10 s write deadline, which closes its connection), then healed",
		prepare: func(s *stack) []pubSpec {
			s.victim = s.commands[0].host
			return bothWays(s, s.cluster.Nodes[0])
		},
		fault: func(s *stack) {
			s.cut(s.victim, faultAt, cutFor)
		},
	},
	{
		id:    "c",
		name:  "c_tick_holder_isolated",
		about: "an emitter replica that served a shard of the last tick is cut off for 12 s, then healed",
		prepare: func(s *stack) []pubSpec {
			return bothWays(s, s.cluster.Nodes[0])
		},
		fault: func(s *stack) {
			s.sleepUntil(faultAt)
			var holder *function
			if ems := s.emissions(); len(ems) > 0 {
				for _, e := range s.emitters {
					if slices.Contains(ems[len(ems)-1].replicas, e.name) {
						holder = e
					}
				}
			}
			if holder == nil {
				s.t.Errorf("no emission before the cut: cannot tell which emitter holds the tick")
				return
			}
			s.victim = holder.host
			s.cut(holder.host, faultAt, cutFor)
		},
	},
	{
		id:    "d",
		name:  "d_flapping_link",
		about: "one command replica's link goes down and up every 1-3 s for 30 s",
		prepare: func(s *stack) []pubSpec {
			s.victim = s.commands[0].host
			return bothWays(s, s.cluster.Nodes[0])
		},
		fault: func(s *stack) {
			const from = 3 * time.Second
			s.sleepUntil(from)
			rng := rand.New(rand.NewPCG(uint64(s.run), 5))
			end := s.start.Add(from + 30*time.Second)
			flaps := 0
			for time.Now().Before(end) {
				s.victim.Cut()
				time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
				s.victim.Heal()
				flaps++
				if time.Now().Before(end) {
					time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
				}
			}
			s.note("%s: link flapped %d times over 30 s", s.victim.Name, flaps)
		},
	},
	{
		id:    "e",
		name:  "e_publisher_on_isolated_node",
		about: "a third publisher knows only one node, which is cut off for 12 s, then healed",
		prepare: func(s *stack) []pubSpec {
			// A node that leads neither the commands stream nor a records bucket: the cut
			// then concerns that publisher, not the functions. The eight buckets' leaders
			// spread over the nodes, so they are moved to the commands stream's first.
			leader := s.leaderNode(domain.CommandsStream)
			for _, cell := range domain.AllCells() {
				if err := MoveLeader(context.Background(), s.nc, s.js, cell.RecordsStream(), leader.Name); err != nil {
					s.t.Fatal(err)
				}
			}
			lead := map[string]bool{leader.Name: true}
			var only *Node
			for _, nd := range s.cluster.Nodes {
				if !lead[nd.Name] {
					only = nd
				}
			}
			s.victim = only.Host
			pubs := bothWays(s, s.cluster.Nodes[0])
			return append(pubs, pubSpec{name: "pub-only", servers: []*Node{only}, rate: 20})
		},
		fault: func(s *stack) {
			s.cut(s.victim, faultAt, cutFor)
		},
	},
	{
		id:    "f",
		name:  "f_command_replica_node_isolated",
		about: "the node a command replica is connected to is cut off for 12 s with its clients, then healed",
		prepare: func(s *stack) []pubSpec {
			s.victim = s.nodeOf(s.commands[0]).Host
			return bothWays(s, s.cluster.Nodes[0])
		},
		fault: func(s *stack) {
			s.cut(s.victim, faultAt, cutFor)
		},
	},
}

// function is one maintctl function process on a host of its own.
type function struct {
	name string
	host *Host
	proc *testenv.Proc
}

// stack is everything one run has: network, cluster, functions, the test's connection and
// the OTLP receiver the emitters export to.
type stack struct {
	t        *testing.T
	run      int
	net      *Net
	cluster  *Cluster
	nc       *nats.Conn
	js       jetstream.JetStream
	recv     *otlpreceiver.Receiver
	commands []*function
	emitters []*function
	victim   *Host
	start    time.Time

	mu    sync.Mutex
	notes []string
}

func startStack(t *testing.T, run int) *stack {
	t.Helper()
	s := &stack{t: t, run: run, net: NewNet(t)}
	s.cluster = StartCluster(t, s.net, natsBin, 3)
	s.nc = s.cluster.Connect(t)
	s.js = testenv.JetStream(t, s.nc)
	prov := hostCmd(maintctlBin, "provision", "--server", s.cluster.URLs(), "--replicas", "3", "--tick", tick.String())
	prov.Env = testenv.ProcEnv()
	if out, err := prov.CombinedOutput(); err != nil {
		t.Fatalf("maintctl provision: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testenv.KeepBucketHistory(ctx, s.js); err != nil {
		t.Fatalf("keep the bucket's history: %v", err)
	}
	s.recv = otlpreceiver.Start(t, otlpreceiver.WithHost(s.net.HostIP))
	for i := 1; i <= 2; i++ {
		s.commands = append(s.commands, s.startFunction(fmt.Sprintf("command-%d", i), "command"))
		s.emitters = append(s.emitters, s.startFunction(fmt.Sprintf("emitter-%d", i), "emitter"))
	}
	return s
}

// startFunction runs `maintctl function KIND` on a new host, exporting to the receiver with
// replica=name as a resource attribute.
func (s *stack) startFunction(name, kind string) *function {
	s.t.Helper()
	h := s.net.AddHost(name)
	// Debug logs name the stream sequences a replica retried, fenced or dead-lettered: the
	// trail of a doubled command. Metrics every second tell how much each replica handled.
	cmd := h.Command(maintctlBin, "function", kind, "--server", s.cluster.URLs(), "--log-level", "debug")
	cmd.Env = testenv.ProcEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+s.recv.GRPCEndpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_RESOURCE_ATTRIBUTES=replica="+name, "OTEL_METRIC_EXPORT_INTERVAL=1000")
	p := testenv.StartProc(s.t, name, cmd)
	p.WaitFor("function started", 30*time.Second)
	return &function{name: name, host: h, proc: p}
}

// leaderNode is the node leading a stream, waiting for one to be elected.
func (s *stack) leaderNode(stream string) *Node {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		name := StreamLeader(ctx, s.js, stream)
		cancel()
		if nd := s.cluster.Node(name); nd != nil {
			return nd
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s has no leader", stream)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *stack) sleepUntil(d time.Duration) { time.Sleep(time.Until(s.start.Add(d))) }

// note keeps a line for the run's log (the fault runs in a goroutine of its own).
func (s *stack) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf("+%s ", time.Since(s.start).Round(100*time.Millisecond))+fmt.Sprintf(format, args...))
}

// cut cuts h's link at offset at of the load for d, then heals it.
func (s *stack) cut(h *Host, at, d time.Duration) {
	s.sleepUntil(at)
	h.Cut()
	s.note("%s (%s) cut off", h.Name, h.IP)
	time.Sleep(d)
	h.Heal()
	s.note("%s healed", h.Name)
}

type emission struct {
	at       time.Time
	replicas []string // the emitters that sent the tick's shards
}

// emissions lists the whole emissions of ticks received (every shard's), by arrival.
func (s *stack) emissions() []emission {
	var out []emission
	for _, e := range s.recv.Emissions(domain.DefaultShards) {
		out = append(out, emission{at: e.At, replicas: e.Replicas})
	}
	return out
}

// publisher is one load publisher process and where its records go.
type publisher struct {
	spec pubSpec
	cfg  PublisherConfig
	proc *testenv.Proc
}

func (s *stack) startPublisher(sp pubSpec, prefix string, ids []string, seed uint64) *publisher {
	s.t.Helper()
	self, err := os.Executable()
	if err != nil {
		s.t.Fatal(err)
	}
	var urls []string
	for _, nd := range sp.servers {
		urls = append(urls, nd.URL)
	}
	cfg := PublisherConfig{Servers: strings.Join(urls, ","), IDPrefix: prefix + "-" + sp.name, Entities: ids, Rate: sp.rate,
		Duration: loadFor, Seed: seed, AckTimeout: ackTimeout, Out: filepath.Join(s.t.TempDir(), sp.name+".jsonl")}
	b, _ := json.Marshal(cfg)
	h := s.net.AddHost(sp.name)
	cmd := h.Command(self)
	cmd.Env = testenv.ProcEnv(PublisherEnv + "=" + string(b))
	return &publisher{spec: sp, cfg: cfg, proc: testenv.StartProc(s.t, sp.name, cmd)}
}

func runScenario(t *testing.T, sc scenario, run int) {
	s := startStack(t, run)
	t.Logf("scenario %s run %d: %s", sc.id, run, sc.about)
	pubs := sc.prepare(s)
	t.Logf("functions connected to: %s", s.connectedTo())
	var running []*publisher
	if dir := os.Getenv("MAINT_PARTITION_LOGS"); dir != "" {
		// Every process's log, kept for reading after the run (the temporary directory goes).
		t.Cleanup(func() {
			procs := []*testenv.Proc{}
			for _, nd := range s.cluster.Nodes {
				procs = append(procs, nd.Proc)
			}
			for _, f := range append(s.commands, s.emitters...) {
				procs = append(procs, f.proc)
			}
			for _, p := range running {
				procs = append(procs, p.proc)
			}
			keepLogs(t, filepath.Join(dir, fmt.Sprintf("%s-run%d", sc.name, run)), procs)
		})
	}

	prefix := fmt.Sprintf("%s-r%d", sc.id, run)
	ids := testenv.ResourceIDs("part-"+prefix, entities)
	s.start = time.Now()
	for i, sp := range pubs {
		running = append(running, s.startPublisher(sp, prefix, ids, uint64(run*10+i)))
	}
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		sc.fault(s)
	}()
	// The fault reports to t: the test must not end under it, even when it fails early.
	t.Cleanup(func() { <-faultDone })
	for _, p := range running {
		select {
		case <-p.proc.Exited():
			if err := p.proc.WaitErr(); err != nil {
				t.Errorf("%s: %v\n%s", p.spec.name, err, testenv.Tail(p.proc.ErrPath, 20))
			}
		case <-time.After(time.Until(s.start.Add(loadFor + ackTimeout + time.Minute))):
			t.Fatalf("%s did not finish", p.spec.name)
		}
	}
	<-faultDone
	for _, h := range s.net.hosts {
		h.Heal() // whatever a fault left cut (it heals its own; this is for a fault that failed)
	}
	s.mu.Lock()
	for _, n := range s.notes {
		t.Log(n)
	}
	s.mu.Unlock()

	// What the publishers learnt.
	acked := map[string]bool{}
	var sent, nAcked, nErr, nTimeout int
	unacked := map[string]bool{}
	for _, p := range running {
		recs, err := ReadPubRecords(p.cfg.Out)
		if err != nil {
			t.Fatal(err)
		}
		want := int(p.cfg.Rate * p.cfg.Duration.Seconds())
		if len(recs) != want {
			t.Errorf("%s sent %d commands but learnt the fate of %d: a publish neither acknowledged nor reported", p.spec.name, want, len(recs))
		}
		var pa, pe, pt int
		errs := map[string]int{}
		var firstUnacked, lastUnacked time.Time
		for _, r := range recs {
			if r.Result != ResultAcked {
				errs[r.Err]++
				if firstUnacked.IsZero() || r.Sent.Before(firstUnacked) {
					firstUnacked = r.Sent
				}
				if r.Sent.After(lastUnacked) {
					lastUnacked = r.Sent
				}
			}
			switch r.Result {
			case ResultAcked:
				acked[r.ID] = true
				pa++
			case ResultError:
				unacked[r.ID] = true
				pe++
			case ResultTimeout:
				unacked[r.ID] = true
				pt++
			default:
				t.Errorf("%s: %s: result %q", p.spec.name, r.ID, r.Result)
			}
		}
		sent += len(recs)
		nAcked, nErr, nTimeout = nAcked+pa, nErr+pe, nTimeout+pt
		t.Logf("%s (%s): sent %d, acknowledged %d, error %d, timeout %d", p.spec.name, p.cfg.Servers, len(recs), pa, pe, pt)
		if len(errs) > 0 {
			// What the publisher was told, and when the unacknowledged commands were sent.
			t.Logf("%s: not acknowledged: %v; sent from +%s to +%s", p.spec.name, errs,
				firstUnacked.Sub(s.start).Round(100*time.Millisecond), lastUnacked.Sub(s.start).Round(100*time.Millisecond))
		}
	}

	a := testenv.RunAudit(t, s.js, testenv.AuditInput{
		Ours:  func(id string) bool { return strings.HasPrefix(id, prefix+"-") },
		Acked: acked,
		Writes: func() map[string][]uint64 {
			// A returning replica's late work shows within seconds of the heal; the load
			// ended long before, and a little more time catches what follows the last outcome.
			time.Sleep(2 * time.Second)
			return testenv.BucketWrites(t, s.js)
		},
		Wait: auditWait,
	})
	storedUnacked := 0
	for id := range unacked {
		if a.IsStored(id) {
			storedUnacked++
		}
	}

	ems := s.emissions()
	var gap time.Duration
	var gapAt time.Time
	for i := 1; i < len(ems); i++ {
		if ems[i].at.Before(s.start) {
			continue
		}
		if d := ems[i].at.Sub(ems[i-1].at); d > gap {
			gap, gapAt = d, ems[i-1].at
		}
	}
	byReplica := map[string]int{}
	for _, e := range ems {
		if !e.at.Before(s.start) {
			for _, rep := range e.replicas {
				byReplica[rep]++
			}
		}
	}
	t.Logf("emissions since the load began, by replica: %v; longest gap %s from +%s", byReplica, gap.Round(time.Millisecond), gapAt.Sub(s.start).Round(100*time.Millisecond))
	if a.StallID != "" {
		t.Logf("longest wait for an outcome: %s, command %s", a.MaxOutcomeStall.Round(time.Millisecond), a.StallID)
	}
	t.Logf("scenario=%s run=%d sent=%d acked=%d pub_errors=%d pub_timeouts=%d unacked_stored=%d stored=%d applied=%d rejected=%d dead_lettered=%d duplicate=%d lost=%d doubled=%d model_mismatches=%d max_outcome_stall=%s max_signal_gap=%s",
		sc.id, run, sent, nAcked, nErr, nTimeout, storedUnacked, a.Stored, a.Applied, a.Rejected, a.DeadLettered, a.Duplicate,
		a.Lost, a.Doubles(), len(a.Mismatches), a.MaxOutcomeStall.Round(time.Millisecond), gap.Round(time.Millisecond))

	t.Logf("messages handled per command replica: %v", s.handled())
	for _, c := range s.commands {
		t.Logf("%s log: %s", c.name, logDigest(c.proc.ErrPath))
	}
	report := func(what string, list []string) {
		if len(list) == 0 {
			return
		}
		sort.Strings(list)
		shown := list
		if len(shown) > 25 {
			shown = shown[:25]
		}
		t.Errorf("%d %s:\n  %s", len(list), what, strings.Join(shown, "\n  "))
	}
	report("acknowledged commands not in the commands stream (lost)", a.AckedMissed)
	report("stored commands without an outcome (lost)", a.NoOutcome)
	report("commands applied or answered more than once (doubled)", a.Doubled)
	for i, seq := range a.DoubledSeqs {
		if i == 5 {
			break
		}
		for _, c := range s.commands {
			if lines := grepLog(c.proc.ErrPath, "seq="+strconv.FormatUint(seq, 10)+" "); lines != "" {
				t.Logf("%s on command seq %d:\n%s", c.name, seq, lines)
			}
		}
	}
	report("outcomes or records that differ from the sequential model", a.Mismatches)
	if sent == 0 || a.Stored == 0 {
		t.Errorf("no load: sent %d, stored %d", sent, a.Stored)
	}
}

// hostCmd runs a program in the test's own namespace (the host side of the network).
func hostCmd(bin string, args ...string) *exec.Cmd { return exec.Command(bin, args...) }

// handled is, per command replica, the messages it handled so far (messaging.process.duration
// counts, summed over consumers and results).
func (s *stack) handled() map[string]uint64 {
	latest := map[string]map[string]uint64{}
	for _, p := range otlpreceiver.Find(s.recv.Points(), "messaging.process.duration", nil) {
		rep := p.Resource["replica"]
		if latest[rep] == nil {
			latest[rep] = map[string]uint64{}
		}
		latest[rep][p.Attrs["messaging.consumer.group.name"]+"/"+p.Attrs["maint.result"]+"/"+p.Attrs["error.type"]] = p.Count
	}
	out := map[string]uint64{}
	for rep, m := range latest {
		for _, n := range m {
			out[rep] += n
		}
	}
	return out
}

// grepLog returns the lines of a log file that contain s (at most 20).
func grepLog(path, s string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			out = append(out, "    "+line)
		}
	}
	if len(out) > 20 {
		out = out[len(out)-20:]
	}
	return strings.Join(out, "\n")
}

var logMsg = regexp.MustCompile(`level=(\w+) msg=("(?:[^"\\]|\\.)*"|\S+)`)

// logDigest counts a process's log lines by level and message, debug lines left out: what a
// replica went through during the run, in one line.
func logDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	counts := map[string]int{}
	for _, m := range logMsg.FindAllStringSubmatch(string(b), -1) {
		if m[1] != "DEBUG" {
			counts[m[1]+" "+m[2]]++
		}
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// keepLogs copies the processes' stdout and stderr into dir.
func keepLogs(t *testing.T, dir string, procs []*testenv.Proc) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	for _, p := range procs {
		for _, f := range []string{p.OutPath, p.ErrPath} {
			if b, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
			}
		}
	}
	t.Logf("process logs kept in %s", dir)
}

var startedOn = regexp.MustCompile(`msg="function starting" .*server=nats://([0-9.]+):`)

// nodeOf is the node a function process connected to first.
func (s *stack) nodeOf(f *function) *Node {
	s.t.Helper()
	if b, err := os.ReadFile(f.proc.ErrPath); err == nil {
		if m := startedOn.FindSubmatch(b); m != nil {
			for _, nd := range s.cluster.Nodes {
				if nd.Host.IP == string(m[1]) {
					return nd
				}
			}
		}
	}
	s.t.Fatalf("%s: cannot tell which node it connected to", f.name)
	return nil
}

// connectedTo says which node each function process connected to first (its client picks one
// of the list at random): a node cut off with its clients is another fault than one without.
func (s *stack) connectedTo() string {
	var parts []string
	for _, f := range append(append([]*function{}, s.commands...), s.emitters...) {
		node := "?"
		if b, err := os.ReadFile(f.proc.ErrPath); err == nil {
			if m := startedOn.FindSubmatch(b); m != nil {
				for _, nd := range s.cluster.Nodes {
					if nd.Host.IP == string(m[1]) {
						node = nd.Name
					}
				}
			}
		}
		parts = append(parts, f.name+"→"+node)
	}
	return strings.Join(parts, ", ")
}
