package fault

// Regions (README, Regions) with real processes: a hub (`maintctl hub`) and two regions
// (`maintctl up --region`), each its own process and nats-server; east joins the hub through
// a TCP relay the test cuts. With the link cut, and with the hub killed, each region's
// commands apply and its collector receives every entity at every tick; the hub shows the
// region stale meanwhile and fresh again once it is back. A stopped region goes stale while
// the other stays fresh.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// regionTick is the regions' tick here.
const regionTick = time.Second

// backWithin is the contract's bound for a region that comes back: fresh within 5 s plus two
// of its ticks.
const backWithin = 5*time.Second + 2*regionTick

type regionProc struct {
	name, url string
	p         *proc
	r         *otlpreceiver.Receiver
	ids       []string
}

type regionsRig struct {
	t                  *testing.T
	hubData, hubListen string
	leafPort           int
	hub                *proc
	link               *testenv.Link
	js                 jetstream.JetStream // the test's connection to the hub
	east, west         *regionProc
}

func startRegionsRig(t *testing.T) *regionsRig {
	g := &regionsRig{t: t, hubData: filepath.Join(t.TempDir(), "hub"), leafPort: testenv.FreePort(t),
		hubListen: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))}
	g.startHub("hub")
	g.link = testenv.StartLink(t, "127.0.0.1:"+strconv.Itoa(g.leafPort))
	g.east = g.startRegion("east", g.link.URL())
	g.west = g.startRegion("west", fmt.Sprintf("nats-leaf://127.0.0.1:%d", g.leafPort))
	nc, err := nats.Connect("nats://"+g.hubListen, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	g.js = testenv.JetStream(t, nc)
	return g
}

func (g *regionsRig) startHub(name string) {
	g.hub = startProc(g.t, name, procEnv(), "hub", "--regions", "east,west", "--listen", g.hubListen,
		"--leafnodes-listen", "127.0.0.1:"+strconv.Itoa(g.leafPort), "--data", g.hubData, "--metrics-listen", "", "--web-listen", "")
	g.hub.WaitFor("ready:", 30*time.Second)
}

func (g *regionsRig) startRegion(name, hubURL string) *regionProc {
	rp := &regionProc{name: name, url: "nats://127.0.0.1:" + strconv.Itoa(testenv.FreePort(g.t)), r: otlpreceiver.Start(g.t)}
	rp.p = startProc(g.t, name, procEnv(otelEnv(rp.r, name)...), "up", "--region", name, "--hub", hubURL,
		"--listen", rp.url[len("nats://"):], "--data", filepath.Join(g.t.TempDir(), name), "--tick", regionTick.String(),
		"--metrics-listen", "", "--web-listen", "")
	rp.p.WaitFor("ready:", 60*time.Second)
	return rp
}

// view is the hub's view now ("" and an empty view when the hub does not answer).
func (g *regionsRig) view() (regions.View, error) {
	return regions.Read(testenv.Context(g.t, 3*time.Second), g.js, time.Now(), testenv.Quiet())
}

// waitUntil polls the hub's view until cond holds, and returns how long that took.
func (g *regionsRig) waitUntil(what string, within time.Duration, cond func(regions.View) bool) time.Duration {
	g.t.Helper()
	start := time.Now()
	testenv.Eventually(g.t, within, what, func() bool {
		v, err := g.view()
		return err == nil && cond(v)
	})
	return time.Since(start)
}

func stale(names ...string) func(regions.View) bool {
	return func(v regions.View) bool { return slices.Equal(v.StaleRegions, names) }
}

// pendingIn is whether the hub shows n entities Pending in the region, fresh.
func pendingIn(name string, n int64) func(regions.View) bool {
	return func(v regions.View) bool {
		for _, r := range v.Regions {
			if r.Region == name {
				return !r.Stale && r.Counts.Counts[domain.StatePending] == n
			}
		}
		return false
	}
}

// announce sends `maintctl pending` for a new entity of the region, which must apply.
func (g *regionsRig) announce(rp *regionProc) {
	g.t.Helper()
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", rp.name, len(rp.ids))
	out, err := exec.Command(bin, "--server", rp.url, "pending", id, "--timeout", "10s").CombinedOutput()
	if err != nil {
		g.t.Fatalf("pending in %s while the hub is away: %v\n%s", rp.name, err, out)
	}
	rp.ids = append(rp.ids, id)
}

// everyTick checks that each emission of the region whose tick falls in [from, to] carries
// every entity announced before from, and that no two emissions are more than three ticks
// apart.
func (g *regionsRig) everyTick(rp *regionProc, ids []string, from, to time.Time) {
	g.t.Helper()
	var ticks []time.Time
	for _, em := range rp.r.Emissions(domain.DefaultShards) {
		if em.Tick.Before(from) || em.Tick.After(to) {
			continue
		}
		ticks = append(ticks, em.Tick)
		for _, id := range ids {
			if len(em.Export.Find("cluster.maintenance.status", map[string]string{"cloud.resource_id": id})) == 0 {
				g.t.Errorf("%s: the tick of %s left out %s", rp.name, em.Tick.Format("15:04:05.000"), id)
			}
		}
	}
	slices.SortFunc(ticks, time.Time.Compare)
	if len(ticks) == 0 {
		g.t.Errorf("%s: no emission between %s and %s", rp.name, from.Format("15:04:05"), to.Format("15:04:05"))
	}
	for i := 1; i < len(ticks); i++ {
		if gap := ticks[i].Sub(ticks[i-1]); gap > 3*regionTick {
			g.t.Errorf("%s: no emission for %s before %s", rp.name, gap, ticks[i].Format("15:04:05.000"))
		}
	}
	g.t.Logf("%s: %d emissions between %s and %s, each with its %d entities", rp.name, len(ticks), from.Format("15:04:05"), to.Format("15:04:05"), len(ids))
}

func TestRegions_EachRegionWorksWithoutTheHubAndTheHubSeesItsAge(t *testing.T) {
	needBinary(t)
	g := startRegionsRig(t)
	g.announce(g.east)
	g.announce(g.west)
	g.waitUntil("both regions fresh, with their entity", backWithin+10*time.Second, func(v regions.View) bool {
		return pendingIn("east", 1)(v) && pendingIn("west", 1)(v)
	})

	g.tickToHub("west", 5*time.Second)

	// The link cut: east goes on alone, the hub sees it age.
	before := slices.Clone(g.east.ids)
	g.link.Cut()
	cutAt := time.Now()
	g.announce(g.east)
	d := g.waitUntil("east stale with its link cut", 3*regionTick+10*time.Second, stale("east"))
	t.Logf("link cut: east stale at the hub after %s", d.Round(100*time.Millisecond))
	// Long enough for both ends to drop the leaf connection (three missed pings, 2 s apart).
	time.Sleep(10 * time.Second)
	g.everyTick(g.east, before, cutAt.Add(regionTick), time.Now())
	g.link.Heal()
	d = g.waitUntil("east fresh again, with the command sent while cut", backWithin, pendingIn("east", 2))
	t.Logf("link healed: the hub agrees with east after %s", d.Round(100*time.Millisecond))

	// The hub killed: both regions go on; the hub restarted on its store catches up.
	g.hub.Kill()
	killedAt := time.Now()
	g.announce(g.east)
	g.announce(g.west)
	time.Sleep(4 * time.Second)
	g.everyTick(g.east, g.east.ids[:2], killedAt.Add(regionTick), time.Now())
	g.everyTick(g.west, g.west.ids[:1], killedAt.Add(regionTick), time.Now())
	g.startHub("hub-again")
	d = g.waitUntil("both regions fresh after the hub's restart", backWithin+5*time.Second, func(v regions.View) bool {
		return pendingIn("east", 3)(v) && pendingIn("west", 2)(v)
	})
	t.Logf("hub restarted: it agrees with both regions %s after it was ready", d.Round(100*time.Millisecond))

	// A stopped region: stale within three of its ticks, the other fresh.
	g.stopAndResume(g.west)
}

// stopAndResume stops the region's process (SIGSTOP) until the hub shows it stale, alone, and
// resumes it.
func (g *regionsRig) stopAndResume(rp *regionProc) {
	g.t.Helper()
	if err := rp.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		g.t.Fatal(err)
	}
	d := g.waitUntil(rp.name+" stale, the other region fresh", 3*regionTick+5*time.Second, stale(rp.name))
	g.t.Logf("SIGSTOP %s: stale at the hub after %s", rp.name, d.Round(100*time.Millisecond))
	if err := rp.p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		g.t.Fatal(err)
	}
	d = g.waitUntil(rp.name+" fresh again", backWithin, stale())
	g.t.Logf("SIGCONT %s: fresh again after %s", rp.name, d.Round(100*time.Millisecond))
}

// tickToHub logs how long after a region's tick the hub's view shows it: the view polled every
// 20 ms for d, each new asOf timed from the tick time it carries to its first sight.
func (g *regionsRig) tickToHub(name string, d time.Duration) {
	g.t.Helper()
	seen := map[time.Time]time.Duration{}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		v, err := g.view()
		if err != nil {
			continue
		}
		for _, r := range v.Regions {
			if r.Region == name && r.AsOf != nil {
				if _, ok := seen[*r.AsOf]; !ok {
					seen[*r.AsOf] = time.Since(*r.AsOf)
				}
			}
		}
	}
	var lags []time.Duration
	for _, l := range seen {
		lags = append(lags, l)
	}
	slices.Sort(lags)
	if len(lags) > 1 {
		lags = lags[1:] // the first was already there when the polling began
	}
	if len(lags) > 0 {
		g.t.Logf("%s: from a tick to the hub's view: median %s, max %s over %d ticks", name,
			lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), len(lags))
	}
}
