package alerts_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/otlptranslator"

	"maintsignals/functions/campaign"
	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/functions/hub"
	"maintsignals/infra/alerts"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/regions"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// TestRules_Promtool checks the rules and runs their unit tests with the real promtool
// (Debian's prometheus package; .ci/run installs it).
func TestRules_Promtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH: install Debian's prometheus package (apt-get install prometheus) to run the alerting rules' unit tests")
	}
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var (
	// metricRE finds our metric names in the rules' expressions.
	metricRE = regexp.MustCompile(`\bcluster_maintenance_[a-z_]+\b`)
	// matcherRE finds label matchers: metric{label="value", ...}.
	matcherRE = regexp.MustCompile(`(cluster_maintenance_[a-z_]+)\{([^}]*)\}`)
	labelRE   = regexp.MustCompile(`([a-z_]+)\s*=~?`)
	onRE      = regexp.MustCompile(`on \(([^)]*)\)`)
	// byRE finds the labels a rule aggregates by, and labelRefRE the labels an annotation
	// shows: label names, not metrics.
	byRE       = regexp.MustCompile(`by \(([^)]*)\)`)
	labelRefRE = regexp.MustCompile(`\$labels\.[a-z_]+`)
)

// ruleNames returns the metric names the rules use, per metric the label names they match on,
// and the labels they join on or aggregate by.
func ruleNames(t *testing.T) (metrics []string, labels map[string][]string, joins []string) {
	t.Helper()
	seen := map[string]bool{}
	labels = map[string][]string{}
	rules := labelRefRE.ReplaceAllString(byRE.ReplaceAllString(string(alerts.Rules), "by ()"), "")
	for _, ix := range metricRE.FindAllStringIndex(rules, -1) {
		m := rules[ix[0]:ix[1]]
		// A label name is followed by its matcher's operator.
		if rest := strings.TrimLeft(rules[ix[1]:], " "); strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "!") {
			continue
		}
		if !seen[m] {
			seen[m] = true
			metrics = append(metrics, m)
		}
	}
	for _, m := range matcherRE.FindAllStringSubmatch(string(alerts.Rules), -1) {
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			labels[m[1]] = append(labels[m[1]], l[1])
		}
	}
	for _, m := range onRE.FindAllStringSubmatch(string(alerts.Rules), -1) {
		joins = append(joins, strings.TrimSpace(m[1]))
	}
	for _, m := range byRE.FindAllStringSubmatch(string(alerts.Rules), -1) {
		for _, l := range strings.Split(m[1], ",") {
			l = strings.TrimSpace(l)
			metric := byMetric
			switch {
			case strings.HasPrefix(l, "maintenance_campaign_"):
				metric = byCampaignMetric
			case l == "messaging_destination_name":
				metric = byStreamMetric
			case l == "cloud_region":
				metric = byRegionMetric
			}
			labels[metric] = append(labels[metric], l)
		}
	}
	sort.Strings(metrics)
	if len(metrics) < 6 {
		t.Fatalf("found only %v in the rules", metrics)
	}
	return metrics, labels, joins
}

// exercise makes every function metric that the rules use appear on tel: records with a
// window (one past its end) and an update running past the stuck limit, one emitter run, and
// one command handled by the command function.
func exercise(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Tick = time.Second }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, r := range []domain.Record{
		{ResourceID: "/c/pending", State: domain.StatePending, Window: &domain.Window{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)}, StateSince: now},
		{ResourceID: "/c/overdue", State: domain.StatePending, Window: &domain.Window{Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)}, StateSince: now},
		{ResourceID: "/c/stuck", State: domain.StateUnplanned, Updating: true, Task: domain.TaskEverything, StateSince: now.Add(-7 * time.Hour), UpdatedAt: now.Add(-7 * time.Hour)},
	} {
		r.Version = domain.RecordVersion
		if _, err := st.Put(ctx, domain.MustKey(r.ResourceID), store.Versioned{}, r); err != nil {
			t.Fatal(err)
		}
	}
	quiet := testenv.Quiet()
	e, err := emitter.New(ctx, env.JS, tel, emitter.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, err := e.Emit(ctx); err != nil {
		t.Fatal(err)
	}

	fctx, fcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- command.Run(fctx, env.JS, command.Config{Log: quiet, Meters: tel.MeterProvider()})
	}()
	defer func() { fcancel(); <-done }()
	if _, err := env.JS.PublishMsg(ctx, testenv.CommandMsg(domain.Command{ID: "n-1", ResourceID: "/c/new", Task: domain.TaskPending})); err != nil {
		t.Fatal(err)
	}
	for len(testenv.Events(t, env.JS, domain.EventSubject(domain.MustKey("/c/new")))) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the command got no outcome")
		}
		time.Sleep(50 * time.Millisecond)
	}
	exerciseCampaigns(t, ctx, env, tel)
	exerciseHub(t, tel)
}

// exerciseHub registers the hub's metrics on tel, over a view of one region heard of.
func exerciseHub(t *testing.T, tel *telemetry.Telemetry) {
	now := time.Now()
	part := domain.Summary{Version: 1, Region: "east", Shards: 1, At: now, TickSeconds: 60, Counts: map[domain.State]int64{}}
	reg, err := hub.RegisterMetrics(tel.Meter(hub.ScopeName), func(context.Context) (regions.View, error) {
		return regions.Combine([]string{"east"}, []domain.Summary{part}, now), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Unregister() })
}

// exerciseCampaigns creates a campaign over the tracked entities and serves one tick of the
// campaign function: its burndown and its health appear on tel.
func exerciseCampaigns(t *testing.T, ctx context.Context, env *testenv.Env, tel *telemetry.Telemetry) {
	f, err := campaign.New(ctx, env.JS, campaign.Config{Logger: testenv.Quiet(), Meters: tel.MeterProvider(), Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	body := fmt.Sprintf(`{"id":"ctl-1","campaign":"pucm","action":"create","spec":{"id":"pucm","task":"Everything","selection":{"prefixes":["/c"]},
		"window":{"length":"1h","earliest":%q,"deadline":%q},"spread":{"across":"1h","slot":"15m","maxPerSlot":10},"announceLead":"1h"}}`,
		earliest.Format(time.RFC3339), earliest.Add(24*time.Hour).Format(time.RFC3339))
	msg := function.Message{Subject: domain.CampaignCommandSubject("pucm"), Data: []byte(body), Header: nats.Header{}, Seq: 1, Time: time.Now()}
	if err := f.HandleCommand(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if err := f.HandleTick(ctx, function.Message{}); err != nil {
		t.Fatal(err)
	}
}

// byMetric is the metric the rules aggregate by a label of (the emitter's coverage, by shard).
const byMetric = "cluster_maintenance_emitter_coverage_ratio"

// byStreamMetric carries the stream the stream rules aggregate by.
const byStreamMetric = "cluster_maintenance_stream_subjects"

// byRegionMetric carries the region the region rules aggregate by.
const byRegionMetric = "cluster_maintenance_region_age_seconds"

// byCampaignMetric carries every label the campaign rules aggregate by (the id and the phase).
const byCampaignMetric = "cluster_maintenance_campaign_entities"

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)

// TestRules_NamesAreWhatPrometheusStores_Scrape runs the functions against the Prometheus
// page that `maintctl up` serves and checks that every metric and label the rules use is on
// it, under the exact name a scraping Prometheus stores.
func TestRules_NamesAreWhatPrometheusStores_Scrape(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	t.Setenv("OTEL_METRICS_EXPORTER", "")
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{PrometheusListen: "127.0.0.1:0", Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	exercise(t, tel)

	resp, err := http.Get("http://" + tel.PrometheusAddr() + telemetry.PrometheusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	labelsOf := map[string]map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleRE.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		if labelsOf[m[1]] == nil {
			labelsOf[m[1]] = map[string]bool{}
		}
		for _, l := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`).FindAllStringSubmatch(m[2], -1) {
			labelsOf[m[1]][l[1]] = true
		}
	}
	metrics, labels, joins := ruleNames(t)
	for _, m := range metrics {
		if labelsOf[m] == nil {
			t.Errorf("the rules use %s, which the Prometheus page does not show", m)
		}
	}
	for m, ls := range labels {
		for _, l := range ls {
			if labelsOf[m] != nil && !labelsOf[m][l] {
				t.Errorf("the rules match %s on label %s, which it does not carry on the page", m, l)
			}
		}
	}
	joined := map[string][]string{
		"cloud_resource_id":       {"cluster_maintenance_status_ratio", "cluster_maintenance_window_start_time_seconds", "cluster_maintenance_window_end_time_seconds"},
		"maintenance_campaign_id": {"cluster_maintenance_campaign_status_ratio", "cluster_maintenance_campaign_entities", "cluster_maintenance_campaign_deadline_seconds"},
	}
	for _, j := range joins {
		if joined[j] == nil {
			t.Errorf("the rules join on %s, which this test does not know", j)
		}
		for _, m := range joined[j] {
			if !labelsOf[m][j] {
				t.Errorf("the rules join on %s, which %s does not carry", j, m)
			}
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", page)
	}
}

// TestRules_NamesAreWhatPrometheusStores_OTLP sends the functions' metrics over OTLP and
// names each one as a Prometheus receiving OTLP does (its translator, with unit and type
// suffixes, the default of Prometheus' OTLP receiver): every metric the rules use must be
// among them.
func TestRules_NamesAreWhatPrometheusStores_OTLP(t *testing.T) {
	r := otlpreceiver.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		Endpoint: r.Endpoint(otlpreceiver.GRPC), Protocol: otlpreceiver.GRPC, Interval: time.Hour,
		Logger: testenv.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	exercise(t, tel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	for _, p := range r.Points() {
		typ := otlptranslator.MetricType(otlptranslator.MetricTypeGauge)
		switch {
		case p.Type == otlpreceiver.Sum && p.Monotonic:
			typ = otlptranslator.MetricTypeMonotonicCounter
		case p.Type == otlpreceiver.Sum:
			typ = otlptranslator.MetricTypeNonMonotonicCounter
		case p.Type == otlpreceiver.Histogram:
			typ = otlptranslator.MetricTypeHistogram
		}
		name, err := namer.Build(otlptranslator.Metric{Name: p.Metric, Unit: p.Unit, Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		stored[name] = true
	}
	metrics, _, _ := ruleNames(t)
	for _, m := range metrics {
		if !stored[m] {
			t.Errorf("the rules use %s; over OTLP Prometheus stores only %v", m, keys(stored))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
