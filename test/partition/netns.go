// Package partition runs Maintenance Signals as it runs in production, every nats-server node
// and every function process on a host of its own, and cuts and heals the network between
// them: each process lives in a network namespace with one veth link to a private bridge, and
// a link set down is a host unplugged (no reset, no FIN: the peers learn it from timeouts).
// The tests of this package are the partition scenarios of the project:
//
//	MAINT_PARTITION=1 go test -count=1 -timeout 30m ./test/partition            # as root
//	MAINT_PARTITION=1 MAINT_PARTITION_RUNS=7 go test -run 'TestPartition/^b' ./test/partition
//
// MAINT_PARTITION_RUNS (default 3) is how often each scenario runs; MAINT_PARTITION_LOGS=DIR
// keeps every process's log there. Without MAINT_PARTITION=1 (plain `go test ./...`), as
// non-root, or where namespaces cannot be made, the tests skip and say why.
package partition

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// namePrefix starts the name of every namespace and link the harness creates: "mp", the
// owning process id (6 hex digits) and a counter (2), so that leftovers of a run that died are
// recognised and removed, and concurrent runs never touch each other's.
const namePrefix = "mp"

var (
	ownedName = regexp.MustCompile(`^` + namePrefix + `([0-9a-f]{6})[0-9a-f]{2}`)
	netSeq    atomic.Uint32
)

// Net is one private test network: a bridge in the root namespace holding the test process's
// address (.1 of a 10.231.X.0/24 that exists only on this machine), and one namespace per
// host, linked to the bridge by a veth pair whose bridge-side end Cut and Heal set down and
// up. Namespaces have no route but their /24: nothing leaves the machine.
type Net struct {
	t      testing.TB
	base   string
	bridge string
	subnet string // "10.231.X."
	// HostIP is the address of the test process on the network (the bridge's).
	HostIP string

	mu    sync.Mutex
	hosts []*Host
}

// Host is one network namespace on the Net.
type Host struct {
	Name string // label in logs
	NS   string // namespace name
	Veth string // bridge-side end of its link
	IP   string
	net  *Net
}

// NewNet creates a network, or skips the test with the reason when this machine cannot
// (not root, no ip command, namespaces not permitted). Everything it creates is removed at
// cleanup, whatever the outcome of the test.
func NewNet(t testing.TB) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("partition harness: needs root to create network namespaces (ip netns add); skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partition harness: the ip command (iproute2) is not installed; skipped")
	}
	removeLeftovers(t)
	n := &Net{t: t, base: fmt.Sprintf("%s%06x%02x", namePrefix, os.Getpid()&0xffffff, netSeq.Add(1)&0xff)}
	n.bridge = n.base + "br"
	// Probe: a machine (or container) that forbids namespaces fails here.
	probe := n.base + "probe"
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("partition harness: cannot create a network namespace (ip netns add: %v: %s); skipped", err, bytes.TrimSpace(out))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
	t.Cleanup(n.remove)
	x, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	n.subnet = fmt.Sprintf("10.231.%d.", x)
	n.HostIP = n.subnet + "1"
	n.ip("link", "add", n.bridge, "type", "bridge")
	n.ip("addr", "add", n.HostIP+"/24", "dev", n.bridge)
	n.ip("link", "set", n.bridge, "up")
	t.Logf("partition network %s: bridge %s, %s0/24", n.base, n.bridge, n.subnet)
	return n
}

// AddHost creates a namespace linked to the bridge, with the next free address.
func (n *Net) AddHost(label string) *Host {
	n.t.Helper()
	n.mu.Lock()
	i := len(n.hosts)
	h := &Host{Name: label, NS: fmt.Sprintf("%sh%d", n.base, i), Veth: fmt.Sprintf("%sh%d", n.base, i),
		IP: n.subnet + strconv.Itoa(10+i), net: n}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	peer := fmt.Sprintf("%sp%d", n.base, i)
	n.ip("netns", "add", h.NS)
	n.ip("link", "add", h.Veth, "type", "veth", "peer", "name", peer)
	n.ip("link", "set", peer, "netns", h.NS)
	n.ip("link", "set", h.Veth, "master", n.bridge)
	n.ip("link", "set", h.Veth, "up")
	n.ip("-n", h.NS, "link", "set", peer, "name", "eth0")
	n.ip("-n", h.NS, "addr", "add", h.IP+"/24", "dev", "eth0")
	n.ip("-n", h.NS, "link", "set", "eth0", "up")
	n.ip("-n", h.NS, "link", "set", "lo", "up")
	return h
}

// Cut unplugs the host: its link goes down at the bridge, packets to and from it are dropped
// and nobody gets a reset.
func (h *Host) Cut() { h.net.ip("link", "set", h.Veth, "down") }

// Heal plugs the host back in.
func (h *Host) Heal() { h.net.ip("link", "set", h.Veth, "up") }

// Command is exec.Command of a program run inside the host's namespace (ip netns exec execs
// it: the process's id is the program's).
func (h *Host) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, bin}, args...)...)
}

func (n *Net) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// remove kills whatever still runs in the namespaces, then deletes them (their veth pairs go
// with them) and the bridge.
func (n *Net) remove() {
	n.mu.Lock()
	hosts := append([]*Host(nil), n.hosts...)
	n.mu.Unlock()
	for _, h := range hosts {
		deleteNS(h.NS)
		_ = exec.Command("ip", "link", "del", h.Veth).Run()
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
}

// deleteNS kills the processes left in a namespace (only ever the harness's own) and deletes it.
func deleteNS(ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
}

// removeLeftovers deletes the namespaces and links of earlier runs whose process is gone (a
// run killed before its cleanup).
func removeLeftovers(t testing.TB) {
	dead := func(name string) bool {
		m := ownedName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.ParseInt(m[1], 16, 64)
		if int(pid) == os.Getpid()&0xffffff {
			return false
		}
		return syscall.Kill(int(pid), 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && dead(f[0]) {
				t.Logf("removing namespace %s left by an earlier run", f[0])
				deleteNS(f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if dead(name) {
				t.Logf("removing link %s left by an earlier run", name)
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
}

// freeSubnet picks X for a 10.231.X.0/24 no interface of this machine uses.
func freeSubnet() (int, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return 0, fmt.Errorf("ip addr show: %w", err)
	}
	start := (os.Getpid() + int(netSeq.Load())) % 240
	for k := 0; k < 240; k++ {
		x := 10 + (start+k)%240
		if !bytes.Contains(out, []byte(fmt.Sprintf(" 10.231.%d.", x))) {
			return x, nil
		}
	}
	return 0, fmt.Errorf("no free 10.231.X.0/24")
}
