package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/functions/webhook"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/test/testenv"
)

// kedaScaler does what KEDA's nats-jetstream scaler does for one trigger: GET
// /jsz?acc=<account>&consumers=true&config=true on the monitoring endpoint; on a cluster
// (meta_cluster.cluster_size > 1) it reads /varz there, visits every advertised node
// (connect_urls, on the endpoint's monitoring port) and keeps the answer of the node named as
// the consumer's cluster leader. The lag is num_pending + num_ack_pending of the consumer
// named in the trigger, or the stream's last sequence when no such consumer exists; the
// trigger is active when the lag exceeds activationLagThreshold.
type kedaScaler struct {
	client                   *http.Client
	endpoint                 string // natsServerMonitoringEndpoint, host:port
	account, stream, consume string
	activation               int64

	// The leader and its node, cached once found as KEDA does; a different leader named in a
	// later answer sends it looking again.
	leaderName, leaderURL string
}

type jszConsumer struct {
	Name          string `json:"name"`
	NumPending    int64  `json:"num_pending"`
	NumAckPending int64  `json:"num_ack_pending"`
	Cluster       struct {
		Leader string `json:"leader"`
	} `json:"cluster"`
}

type jszStream struct {
	Name  string `json:"name"`
	State struct {
		LastSeq int64 `json:"last_seq"`
	} `json:"state"`
	Consumers []jszConsumer `json:"consumer_detail"`
}

type jszResponse struct {
	Accounts []struct {
		Name    string      `json:"name"`
		Streams []jszStream `json:"stream_detail"`
	} `json:"account_details"`
	MetaCluster struct {
		ClusterSize int `json:"cluster_size"`
	} `json:"meta_cluster"`
}

type varzResponse struct {
	ServerName  string   `json:"server_name"`
	ConnectURLs []string `json:"connect_urls"`
}

func newKEDAScaler(client *http.Client, tr Trigger, endpoint string) (*kedaScaler, error) {
	act, err := strconv.ParseInt(tr.Metadata["activationLagThreshold"], 10, 64)
	if err != nil {
		return nil, err
	}
	if endpoint == "" {
		endpoint = tr.Metadata["natsServerMonitoringEndpoint"]
	}
	return &kedaScaler{client: client, endpoint: endpoint, account: tr.Metadata["account"], stream: tr.Metadata["stream"], consume: tr.Metadata["consumer"], activation: act}, nil
}

func (k *kedaScaler) jszURL(host string) string {
	return fmt.Sprintf("http://%s/jsz?acc=%s&consumers=true&config=true", host, k.account)
}

func (k *kedaScaler) get(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

// find returns the stream and the consumer of the trigger in a /jsz answer.
func (k *kedaScaler) find(r *jszResponse) (*jszStream, *jszConsumer) {
	for _, a := range r.Accounts {
		if a.Name != k.account {
			continue
		}
		for i := range a.Streams {
			s := &a.Streams[i]
			if s.Name != k.stream {
				continue
			}
			for j := range s.Consumers {
				if s.Consumers[j].Name == k.consume {
					return s, &s.Consumers[j]
				}
			}
			return s, nil
		}
	}
	return nil, nil
}

// poll is one KEDA polling round: the lag, whether it activates, the consumer's presence and
// the node that answered.
func (k *kedaScaler) poll(ctx context.Context) (lag int64, active, found bool, from string, err error) {
	from = k.endpoint
	if k.leaderURL != "" {
		from = k.leaderURL
	}
	var r jszResponse
	if err := k.get(ctx, k.jszURL(from), &r); err != nil {
		return 0, false, false, "", err
	}
	stream, cons := k.find(&r)
	if r.MetaCluster.ClusterSize > 1 && (cons == nil || k.leaderURL == "" || cons.Cluster.Leader != k.leaderName) {
		k.leaderURL, k.leaderName = "", ""
		stream, cons, from, err = k.leader(ctx)
		if err != nil {
			return 0, false, false, "", err
		}
	}
	if stream == nil {
		return 0, false, false, from, fmt.Errorf("stream %s not found", k.stream)
	}
	if cons == nil {
		return stream.State.LastSeq, stream.State.LastSeq > k.activation, false, from, nil
	}
	lag = cons.NumPending + cons.NumAckPending
	return lag, lag > k.activation, true, from, nil
}

// leader visits the advertised nodes for the one that leads the consumer.
func (k *kedaScaler) leader(ctx context.Context) (*jszStream, *jszConsumer, string, error) {
	var v varzResponse
	if err := k.get(ctx, "http://"+k.endpoint+"/varz", &v); err != nil {
		return nil, nil, "", err
	}
	if len(v.ConnectURLs) == 0 {
		return nil, nil, "", fmt.Errorf("the servers advertise no client URLs: KEDA would guess node names from cluster.urls (set no_advertise: false)")
	}
	_, port, err := net.SplitHostPort(k.endpoint)
	if err != nil {
		return nil, nil, "", err
	}
	for _, cu := range v.ConnectURLs {
		host := net.JoinHostPort(strings.Split(cu, ":")[0], port)
		var nv varzResponse
		if err := k.get(ctx, "http://"+host+"/varz", &nv); err != nil {
			return nil, nil, "", err
		}
		var r jszResponse
		if err := k.get(ctx, k.jszURL(host), &r); err != nil {
			return nil, nil, "", err
		}
		if s, c := k.find(&r); c != nil && c.Cluster.Leader == nv.ServerName {
			k.leaderURL, k.leaderName = host, nv.ServerName
			return s, c, host, nil
		}
	}
	return nil, nil, "", fmt.Errorf("no node leads %s/%s", k.stream, k.consume)
}

// recorder keeps every URL requested, to show the requests are exactly KEDA's.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.urls...)
}

// triggers of an overlay on provisioned consumers (not the webhook subscriptions', which the
// webhook function creates: see TestKEDASeesAWebhookSubscriptionsBacklog).
func triggersOf(t *testing.T, overlay string) []Trigger {
	t.Helper()
	r := decodeOverlay(t, overlay)
	var out []Trigger
	for _, so := range r.scaledObjects {
		for _, tr := range so.Spec.Triggers {
			if tr.Metadata["stream"] != domain.WebhookStream {
				out = append(out, tr)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no triggers")
	}
	return out
}

// consumerLag is the truth from the JetStream API.
func consumerLag(t *testing.T, js jetstream.JetStream, stream, name string) (int64, string) {
	t.Helper()
	c, err := js.Consumer(context.Background(), stream, name)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leader := ""
	if ci.Cluster != nil {
		leader = ci.Cluster.Leader
	}
	return int64(ci.NumPending) + int64(ci.NumAckPending), leader
}

var quiet = testenv.Quiet()

// runCommand runs a command-function replica until the returned stop is called.
func runCommand(t *testing.T, js jetstream.JetStream) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- command.Run(ctx, js, command.Config{Log: quiet}) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("command function: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitIdle polls like KEDA until every trigger reads lag 0.
func waitIdle(t *testing.T, scalers map[string]*kedaScaler) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for name, k := range scalers {
		for {
			lag, active, found, _, err := k.poll(context.Background())
			if err == nil && found && lag == 0 && !active {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: lag %d active %v found %v err %v, want back to 0 after the function drained it", name, lag, active, found, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// checkView checks, for every trigger, KEDA's lag against the JetStream API, and returns the
// total lag of the command triggers.
func checkView(t *testing.T, js jetstream.JetStream, scalers map[string]*kedaScaler, servers map[string]string) int64 {
	t.Helper()
	var total int64
	for name, k := range scalers {
		lag, active, found, from, err := k.poll(context.Background())
		if err != nil || !found {
			t.Fatalf("%s: KEDA's view: found %v, err %v", name, found, err)
		}
		want, leader := consumerLag(t, js, k.stream, k.consume)
		if lag != want {
			t.Errorf("%s: KEDA reads lag %d on %s (%s), the consumer has %d pending (leader %s)", name, lag, from, servers[from], want, leader)
		}
		if active != (lag > k.activation) {
			t.Errorf("%s: active %v at lag %d, activation threshold %d", name, active, lag, k.activation)
		}
		if leader != "" && servers[from] != leader {
			t.Errorf("%s: KEDA read node %s (%s), the consumer's leader is %s", name, from, servers[from], leader)
		}
		if k.stream == domain.CommandsStream {
			total += lag
		}
	}
	return total
}

// waitTotal polls like KEDA until the command triggers add up to want (a stored message
// reaches the consumer's leader a moment after the publish is acknowledged on a cluster),
// then checks every trigger against the JetStream API.
func waitTotal(t *testing.T, js jetstream.JetStream, scalers map[string]*kedaScaler, servers map[string]string, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var total int64
		for _, k := range scalers {
			if lag, _, _, _, err := k.poll(context.Background()); err == nil && k.stream == domain.CommandsStream {
				total += lag
			}
		}
		if total == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("KEDA's total lag stays %d, want %d", total, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if total := checkView(t, js, scalers, servers); total != want {
		t.Fatalf("KEDA's total lag %d, want %d", total, want)
	}
}

func TestKEDASeesTheWaitingCommands(t *testing.T) {
	s, js := startServer(t, nil)
	rec := &recorder{}
	client := &http.Client{Transport: rec, Timeout: 5 * time.Second}
	// The service name resolves to the one node (as cluster DNS would).
	monitor := strings.TrimPrefix(s.MonitorURL(), "http://")
	scalers := map[string]*kedaScaler{}
	for _, tr := range triggersOf(t, "dev") {
		k, err := newKEDAScaler(client, tr, monitor)
		if err != nil {
			t.Fatal(err)
		}
		scalers[tr.Name] = k
	}

	// Idle: nothing to wake anyone for.
	if total := checkView(t, js, scalers, nil); total != 0 {
		t.Fatalf("idle: total lag %d, want 0", total)
	}
	for _, u := range rec.seen() {
		pu, err := url.Parse(u)
		if err != nil || pu.Path != "/jsz" || pu.RawQuery != "acc=$G&consumers=true&config=true" {
			t.Fatalf("request %s is not KEDA's", u)
		}
	}

	// Commands published while no command function runs wait, and KEDA sees every one.
	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(1, 2)), 60, testenv.ResourceIDs("keda", 20))
	testenv.PublishAll(t, js, cmds, nil)
	waitTotal(t, js, scalers, nil, int64(len(cmds)))
	activeTriggers := 0
	for _, k := range scalers {
		if _, active, _, _, _ := k.poll(context.Background()); active {
			activeTriggers++
		}
	}
	if activeTriggers < 2 {
		t.Fatalf("%d triggers active with %d commands over 20 entities, want the partitions they fell in", activeTriggers, len(cmds))
	}

	// A function drains them: back to zero, so the command function can go back to zero.
	stop := runCommand(t, js)
	testenv.Verify(t, js, cmds, 60*time.Second)
	waitIdle(t, scalers)
	stop()

	// A trigger on a consumer that does not exist reads the stream's last sequence: KEDA would
	// scale on the stream's whole history, which is why the manifest test checks the names.
	ghost, err := newKEDAScaler(client, Trigger{Metadata: map[string]string{"account": "$G", "stream": domain.CommandsStream, "consumer": "command-p99", "activationLagThreshold": "0"}}, monitor)
	if err != nil {
		t.Fatal(err)
	}
	lag, active, found, _, err := ghost.poll(context.Background())
	if err != nil || found || lag != int64(len(cmds)) || !active {
		t.Fatalf("missing consumer: lag %d active %v found %v err %v, want the last sequence %d", lag, active, found, err, len(cmds))
	}
}

// loopbackHosts are three addresses of the loopback network, standing for three pods: each
// node listens on the same ports at its own address, as StatefulSet pods do.
var loopbackHosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// commonFreePorts finds n ports free on every loopback host.
func commonFreePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for attempt := 0; len(ports) < n && attempt < 100; attempt++ {
		ln, err := net.Listen("tcp", loopbackHosts[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ok := true
		var held []net.Listener
		for _, h := range loopbackHosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		ln.Close()
		if ok {
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		t.Skip("cannot bind the same port on 127.0.0.1-3 here (loopback aliases not routed)")
	}
	return ports
}

func TestKEDAFindsTheConsumerLeaderInACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster takes seconds to elect its leaders")
	}
	ports := commonFreePorts(t, 3)
	client, route, mon := ports[0], ports[1], ports[2]
	same := func(p int) []int { return []int{p, p, p} }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{
		Nodes: 3, StoreDir: t.TempDir(), Hosts: loopbackHosts,
		ClientPorts: same(client), RoutePorts: same(route), MonitorPorts: same(mon), Name: "keda",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	servers := map[string]string{}
	for i, s := range c.Servers {
		servers[net.JoinHostPort(loopbackHosts[i], strconv.Itoa(mon))] = s.Name()
	}
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js := testenv.JetStream(t, nc)
	r := decodeOverlay(t, "prod")
	pc := provisionConfig(t, r)
	if pc.Replicas != 3 {
		t.Fatalf("prod provisions %d replicas, want 3", pc.Replicas)
	}
	if _, err := provision.Run(ctx, js, pc); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	hc := &http.Client{Transport: rec, Timeout: 5 * time.Second}
	scalers := map[string]*kedaScaler{}
	for _, tr := range triggersOf(t, "prod") {
		// The headless service answers with some node: here always the first.
		k, err := newKEDAScaler(hc, tr, net.JoinHostPort(loopbackHosts[0], strconv.Itoa(mon)))
		if err != nil {
			t.Fatal(err)
		}
		scalers[tr.Name] = k
	}
	if total := checkView(t, js, scalers, servers); total != 0 {
		t.Fatalf("idle: total lag %d", total)
	}
	varz := 0
	for _, u := range rec.seen() {
		if strings.HasSuffix(u, "/varz") {
			varz++
		}
	}
	if varz == 0 {
		t.Fatal("KEDA never read /varz on a cluster")
	}

	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(3, 4)), 60, testenv.ResourceIDs("kedac", 20))
	testenv.PublishAll(t, js, cmds, nil)
	waitTotal(t, js, scalers, servers, int64(len(cmds)))
	stop := runCommand(t, js)
	testenv.Verify(t, js, cmds, 60*time.Second)
	waitIdle(t, scalers)
	stop()
}

// The webhook trigger names a subscription's consumer: KEDA sees the deliveries waiting on it
// (an endpoint down: held and retried in place, counted as ack pending) and sees them gone.
func TestKEDASeesAWebhookSubscriptionsBacklog(t *testing.T) {
	s, js := startServer(t, nil)
	r := decodeOverlay(t, "dev")
	var tr *Trigger
	for _, so := range r.scaledObjects {
		for i := range so.Spec.Triggers {
			if so.Spec.Triggers[i].Metadata["stream"] == domain.WebhookStream {
				tr = &so.Spec.Triggers[i]
			}
		}
	}
	if tr == nil {
		t.Fatal("no webhook trigger")
	}
	name := strings.TrimPrefix(tr.Metadata["consumer"], domain.WebhookConsumerPrefix)
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webhook.Run(wctx, js, webhook.Config{Log: quiet, Backoff: []time.Duration{100 * time.Millisecond},
			Subscriptions: []webhook.Subscription{{Name: name, URL: srv.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}})
	}()
	defer func() {
		wcancel()
		if err := <-done; err != nil {
			t.Errorf("webhook function: %v", err)
		}
	}()
	k, err := newKEDAScaler(&http.Client{Timeout: 5 * time.Second}, *tr, strings.TrimPrefix(s.MonitorURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, found, _, err := k.poll(context.Background()); err == nil && found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("KEDA never found the subscription's consumer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		m := nats.NewMsg(domain.EventSubject(fmt.Sprintf("c%d", i)))
		m.Data = []byte(`{"outcome":"applied","resourceId":"c"}`)
		m.Header.Set(domain.HeaderMsgID, fmt.Sprintf("e-%d", i))
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for {
		lag, active, _, _, err := k.poll(context.Background())
		if err == nil && lag == 5 && active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint down: KEDA reads lag %d active %v (%v), want the 5 waiting deliveries", lag, active, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lag, _ := consumerLag(t, js, domain.WebhookStream, tr.Metadata["consumer"]); lag != 5 {
		t.Fatalf("the consumer has %d pending, KEDA read 5", lag)
	}
	down.Store(false)
	waitIdle(t, map[string]*kedaScaler{tr.Name: k})
}
