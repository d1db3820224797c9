package dashboards_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"maintsignals/infra/dashboards"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// series is one series a query must return: its labels exactly ("*" for a label whose value
// is not known in advance, such as a replica's instance) and a check of its value (the last
// one of a range query).
type series struct {
	labels map[string]string
	value  check
}

type check struct {
	desc string
	ok   func(float64) bool
}

func eq(want float64) check {
	return check{fmt.Sprintf("= %v", want), func(v float64) bool { return v == want }}
}

func within(lo, hi float64) check {
	return check{fmt.Sprintf("in [%v, %v]", lo, hi), func(v float64) bool { return v >= lo && v <= hi }}
}

// shardSeries is one series per shard, each labelled with its shard, of value v.
func shardSeries(v check) []series {
	var out []series
	for s := range domain.DefaultShards {
		out = append(out, series{map[string]string{"cluster_maintenance_emitter_shard": fmt.Sprint(s)}, v})
	}
	return out
}

// perStream is one series per stream, labelled with its name, its value checked by v.
func perStream(streams []string, v func(stream string) check) []series {
	var out []series
	for _, s := range streams {
		out = append(out, series{map[string]string{"messaging_destination_name": s}, v(s)})
	}
	return out
}

// positive is a rate of something that happened between the two exports.
var positive = check{"> 0", func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }}

// want is what one query of a panel must return.
type want struct {
	series []series
}

// entityOfEntityDashboard is the entity the entity dashboard's variable is set to.
var entityOfEntityDashboard = id(kindSoon, "a")

// expectations are, per dashboard file, per panel title, per query refId, what the fleet
// sent by startFleet makes the query return. Every query of every panel needs its row here,
// and every row its query.
func expectations(f fleet, queriedAt time.Time) map[string]map[string]map[string]want {
	n := float64(len(batches))
	ms := func(t time.Time) float64 { return float64(t.UnixMilli()) }
	perBatch := func(kindsOf []string, labels func(kind, batch string) map[string]string, value func(kind string) check) []series {
		var out []series
		for _, k := range kindsOf {
			for _, b := range batches {
				out = append(out, series{labels(k, b), value(k)})
			}
		}
		return out
	}
	byID := func(k, b string) map[string]string { return map[string]string{"cloud_resource_id": id(k, b)} }
	upcoming := []string{kindSoon, kindPlanned} // windows within 14 days
	sinceExport := within(0, time.Since(f.start).Seconds()+60)
	soon := f.windows[kindSoon]
	states := func(v func(state string) check) []series {
		var out []series
		for _, s := range []string{"none", "pending", "planned", "unplanned", "customer_action_needed"} {
			out = append(out, series{map[string]string{"cluster_maintenance_state": s}, v(s)})
		}
		return out
	}
	perState := map[string]float64{"none": n, "pending": 3 * n, "planned": n, "unplanned": n, "customer_action_needed": n}
	one := func(c check) want { return want{series: []series{{nil, c}}} }
	return map[string]map[string]map[string]want{
		"fleet.json": {
			"Tracked entities":   {"A": one(eq(float64(len(kinds)) * n))},
			"Upcoming windows":   {"A": one(eq(float64(len(upcoming)) * n))},
			"Overdue":            {"A": one(eq(n))},
			"Stuck updates":      {"A": one(eq(n))},
			"Policy conflicts":   {"A": one(eq(0))},
			"Signal age":         {"A": one(sinceExport)},
			"Entities per state": {"A": {series: states(func(s string) check { return eq(perState[s]) })}},
			"Windows in the next 14 days": {
				"A": {series: perBatch(upcoming, byID, func(k string) check { return eq(ms(f.windows[k].Start)) })},
				"B": {series: perBatch(upcoming, byID, func(k string) check { return eq(ms(f.windows[k].End)) })},
				"C": {series: perBatch(upcoming, func(k, b string) map[string]string {
					st := map[string]string{kindSoon: "pending", kindPlanned: "planned"}[k]
					return map[string]string{"cloud_resource_id": id(k, b), "cluster_maintenance_state": st}
				}, func(string) check { return eq(1) })},
			},
			"Pending past their window": {"A": {series: perBatch([]string{kindOverdue}, byID, func(k string) check {
				return within(queriedAt.Sub(f.windows[k].End).Seconds()-60, queriedAt.Sub(f.windows[k].End).Seconds()+1)
			})}},
			"Time since last successful export": {"A": {series: []series{{map[string]string{"instance": "*"}, sinceExport}}}},
			"Emitter runs":                      {"A": {series: []series{{map[string]string{"outcome": "success"}, positive}}}},
			"Emitter run duration":              {"A": one(within(1e-9, 60)), "B": one(within(1e-9, 60))},
			"Entities exported": {
				"A": one(eq(float64(len(kinds)) * n)),
				"B": one(eq(float64(len(kinds)) * n)),
			},
			"Emitter coverage per shard": {"A": {series: shardSeries(eq(1))}},
			// The size of each stream as an export read it: the records bucket holds one subject
			// per entity sent by then (its size is read at most every 10 s, so perhaps the
			// first batch's alone), the rest far below the threshold.
			"Subjects per stream": {"A": {series: perStream(f.streams, func(s string) check {
				if strings.HasPrefix(s, "KV_"+domain.RecordsBucketPrefix) {
					return within(0, float64(len(kinds))*n)
				}
				return within(0, 1e5)
			})}},
			"Interior deletes per stream": {"A": {series: perStream(f.streams, func(string) check { return within(0, 1e5) })}},
			"Commands by outcome": {"A": {series: []series{
				{map[string]string{"cluster_maintenance_outcome": "applied"}, positive},
				{map[string]string{"cluster_maintenance_outcome": "rejected", "cluster_maintenance_code": "RequestNotAllowed"}, positive},
			}}},
			"Transitions": {"A": {series: func() []series {
				var out []series
				for _, ft := range [][2]string{{"none", "pending"}, {"pending", "planned"}, {"none", "unplanned"}, {"unplanned", "unplanned"}, {"none", "customer_action_needed"}, {"unplanned", "none"}} {
					out = append(out, series{map[string]string{"cluster_maintenance_from": ft[0], "cluster_maintenance_to": ft[1]}, positive})
				}
				return out
			}()}},
			"Messages processed": {"A": {series: []series{{map[string]string{"messaging_destination_name": "MAINT_COMMANDS", "maint_result": "ack"}, positive}}}},
			"Processing time": {
				"A": {series: []series{{map[string]string{"messaging_destination_name": "MAINT_COMMANDS"}, within(1e-9, 10)}}},
				"B": {series: []series{{map[string]string{"messaging_destination_name": "MAINT_COMMANDS"}, within(1e-9, 10)}}},
			},
		},
		"entity.json": {
			"State":               {"A": {series: []series{{map[string]string{"cluster_maintenance_state": "pending"}, eq(1)}}}},
			"In this state since": {"A": one(within(ms(f.start), ms(queriedAt)))},
			"Window start":        {"A": one(eq(ms(soon.Start)))},
			"Window end":          {"A": one(eq(ms(soon.End)))},
			"State over time": {"A": {series: states(func(s string) check {
				if s == "pending" {
					return eq(1)
				}
				return eq(0)
			})}},
			"Window over time": {"A": one(eq(ms(soon.Start))), "B": one(eq(ms(soon.End)))},
		},
	}
}

// Grafana's defaults where a panel or the data source says nothing: the step of a range
// query, and the data source's scrape interval.
const (
	defaultInterval = 15 * time.Second
	scrapeInterval  = 15 * time.Second
)

// interpolate puts in place of the variables what Grafana does for panel p: the entity of
// the entity dashboard, the campaign of the campaigns dashboard, and $__rate_interval from the panel's interval as Grafana computes
// it (the larger of interval + scrape interval and four scrape intervals). It returns the
// step of a range query too.
func interpolate(t *testing.T, p dashboard.Panel, expr string) (string, time.Duration) {
	t.Helper()
	step := defaultInterval
	if p.Interval != nil {
		d, err := model.ParseDuration(*p.Interval)
		if err != nil {
			t.Fatalf("panel %q: interval %q: %v", title(p), *p.Interval, err)
		}
		step = time.Duration(d)
	}
	rate := max(step+scrapeInterval, 4*scrapeInterval)
	expr = strings.NewReplacer(
		"$__rate_interval", model.Duration(rate).String(),
		"${"+entityVar+"}", entityOfEntityDashboard,
		"$"+entityVar, entityOfEntityDashboard,
		"${"+campaignVar+"}", campaignOfCampaignsDashboard,
		"$"+campaignVar, campaignOfCampaignsDashboard,
	).Replace(expr)
	if strings.Contains(expr, "$") {
		t.Fatalf("a variable this test does not know is left in %s", expr)
	}
	return expr, step
}

// The dashboards each stack checks: every committed dashboard is in exactly one.
var (
	fleetDashboards    = []string{"fleet.json", "entity.json"}
	campaignDashboards = []string{"campaigns.json"}
)

func TestEveryDashboardIsQueried(t *testing.T) {
	var got, want []string
	got = append(append(got, fleetDashboards...), campaignDashboards...)
	for _, d := range dashboards.All() {
		want = append(want, d.File)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the query tests check %v; the dashboards are %v", got, want)
	}
}

// TestQueries_AgainstPrometheus3 runs every query of the fleet and entity dashboards against
// a Prometheus 3 that received, over OTLP, what the command function and the emitter exported
// for the fleet of startFleet, and checks that each returns the series its panel is meant to
// show, with their values.
func TestQueries_AgainstPrometheus3(t *testing.T) {
	prom, f := startFleet(t)
	queriedAt := time.Now()
	var all []string
	for _, k := range kinds {
		for _, b := range batches {
			all = append(all, id(k, b))
		}
	}
	checkQueries(t, prom, queriedAt, fleetDashboards, expectations(f, queriedAt), map[string][]string{
		"entity.json / " + entityVar: all,
	})
}

// TestCampaignQueries_AgainstPrometheus3 does the same for the campaigns dashboard, against
// what the campaign function exported for the campaigns of startCampaigns.
func TestCampaignQueries_AgainstPrometheus3(t *testing.T) {
	prom, c := startCampaigns(t)
	queriedAt := time.Now()
	checkQueries(t, prom, queriedAt, campaignDashboards, campaignExpectations(c, queriedAt), map[string][]string{
		"campaigns.json / " + campaignVar: {campaignHalted, campaignRollout},
	})
	// Over time: at the first tick, before the updater worked, the burndown showed the
	// phases stored then.
	first := campaignExpectations(campaignsSent{start: c.start, campaigns: c.first}, c.firstAt)["campaigns.json"]
	ctx := testenv.Context(t, time.Minute)
	for _, p := range panels(committed(t)["campaigns.json"]) {
		if title(p) != "Entities per phase over time" && title(p) != "Burndown" {
			continue
		}
		for _, target := range p.Targets {
			q := target.(*prometheus.Dataquery)
			t.Run("at the first tick / "+title(p)+" / "+deref(q.RefId), func(t *testing.T) {
				compare(t, q.Expr, run(t, ctx, prom, p, q, c.firstAt), first[title(p)][deref(q.RefId)].series)
			})
		}
	}
}

// The variables of the dashboards, and the values the queries are checked for.
const (
	entityVar   = "cloud_resource_id"
	campaignVar = "campaign"
)

// checkQueries runs every query of the dashboards files and checks it returns what expect
// says; every query needs its expectation, and every expectation its query. variables are
// the values each query variable (by "file / name") must list.
func checkQueries(t *testing.T, prom *testenv.Prometheus, queriedAt time.Time, files []string, expect map[string]map[string]map[string]want, variables map[string][]string) {
	t.Helper()
	ctx := testenv.Context(t, time.Minute)
	used := map[string]bool{}
	all := committed(t)
	for _, file := range files {
		d, ok := all[file]
		if !ok {
			t.Fatalf("no committed dashboard %s", file)
		}
		for _, p := range panels(d) {
			for _, target := range p.Targets {
				q := target.(*prometheus.Dataquery)
				ref := deref(q.RefId)
				key := file + " / " + title(p) + " / " + ref
				w, ok := expect[file][title(p)][ref]
				if !ok {
					t.Errorf("%s: no expectation for this query: add one to the expectations", key)
					continue
				}
				used[key] = true
				t.Run(key, func(t *testing.T) {
					got := run(t, ctx, prom, p, q, queriedAt)
					compare(t, q.Expr, got, w.series)
				})
			}
		}
		checkVariables(t, ctx, prom, file, d, queriedAt, variables)
	}
	for file, ps := range expect {
		for title, refs := range ps {
			for ref := range refs {
				if key := file + " / " + title + " / " + ref; !used[key] {
					t.Errorf("%s: expectation of a query no dashboard has", key)
				}
			}
		}
	}
}

// run runs q as panel p does: an instant query at the given time, or a range query over the
// last ten minutes at the panel's step, whose last point of each series is kept.
func run(t *testing.T, ctx context.Context, prom *testenv.Prometheus, p dashboard.Panel, q *prometheus.Dataquery, at time.Time) map[string]float64 {
	t.Helper()
	expr, step := interpolate(t, p, q.Expr)
	var (
		v        model.Value
		warnings promv1.Warnings
		err      error
	)
	if q.Instant != nil && *q.Instant {
		v, warnings, err = prom.API.Query(ctx, expr, at)
	} else {
		v, warnings, err = prom.API.QueryRange(ctx, expr, promv1.Range{Start: at.Add(-10 * time.Minute), End: at, Step: step})
	}
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	if len(warnings) > 0 {
		t.Errorf("%s: warnings %v", expr, warnings)
	}
	out := map[string]float64{}
	switch v := v.(type) {
	case model.Vector:
		for _, s := range v {
			out[labelKey(s.Metric)] = float64(s.Value)
		}
	case model.Matrix:
		for _, s := range v {
			if len(s.Values) > 0 {
				out[labelKey(s.Metric)] = float64(s.Values[len(s.Values)-1].Value)
			}
		}
	default:
		t.Fatalf("%s: a %s, not a vector or matrix", expr, v.Type())
	}
	return out
}

// labelKey is a series' labels, sorted, as one string.
func labelKey(m model.Metric) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

// compare matches the series returned to the series wanted, one to one.
func compare(t *testing.T, expr string, got map[string]float64, wanted []series) {
	t.Helper()
	left := maps.Clone(got)
	for _, w := range wanted {
		k, ok := find(left, w.labels)
		if !ok {
			t.Errorf("no series %v; got %v\n  query: %s", w.labels, got, expr)
			continue
		}
		if v := left[k]; !w.value.ok(v) {
			t.Errorf("series %s = %v, want %s\n  query: %s", k, v, w.value.desc, expr)
		}
		delete(left, k)
	}
	for k, v := range left {
		t.Errorf("unexpected series %s = %v\n  query: %s", k, v, expr)
	}
}

// find is the key among got whose labels are exactly want ("*" matching any value).
func find(got map[string]float64, want map[string]string) (string, bool) {
	for _, k := range slices.Sorted(maps.Keys(got)) {
		m := parseKey(k)
		if len(m) != len(want) {
			continue
		}
		match := true
		for l, v := range want {
			if gv, ok := m[l]; !ok || (v != "*" && gv != v) {
				match = false
				break
			}
		}
		if match {
			return k, true
		}
	}
	return "", false
}

var pairRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func parseKey(k string) map[string]string {
	m := map[string]string{}
	for _, p := range pairRE.FindAllStringSubmatch(k, -1) {
		m[p[1]] = p[2]
	}
	return m
}

var labelValuesRE = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

// checkVariables runs each query variable as Grafana does (label_values is the label values
// API with a series selector): each lists exactly the values wanted ("file / name"), among
// them the one the queries are checked for.
func checkVariables(t *testing.T, ctx context.Context, prom *testenv.Prometheus, file string, d dashboard.Dashboard, at time.Time, wanted map[string][]string) {
	t.Helper()
	checkedFor := map[string]string{
		"entity.json / " + entityVar:      entityOfEntityDashboard,
		"campaigns.json / " + campaignVar: campaignOfCampaignsDashboard,
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if v.Query == nil || v.Query.String == nil {
			t.Errorf("%s: variable %s has no query", file, v.Name)
			continue
		}
		m := labelValuesRE.FindStringSubmatch(*v.Query.String)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(metric, label)", file, v.Name, *v.Query.String)
			continue
		}
		got, warnings, err := prom.API.LabelValues(ctx, m[2], []string{m[1]}, at.Add(-time.Hour), at)
		if err != nil || len(warnings) > 0 {
			t.Errorf("%s: variable %s: %v %v", file, v.Name, err, warnings)
			continue
		}
		key := file + " / " + v.Name
		want, ok := wanted[key]
		if !ok {
			t.Errorf("%s: variable %s: no expectation in this test", file, v.Name)
			continue
		}
		want = slices.Sorted(slices.Values(want))
		var values []string
		for _, g := range got {
			values = append(values, string(g))
		}
		sort.Strings(values)
		if !slices.Equal(values, want) {
			t.Errorf("%s: variable %s lists %v, want %v", file, v.Name, values, want)
		}
		if !slices.Contains(values, checkedFor[key]) {
			t.Errorf("%s: the value the queries are checked for (%q) is not among the variable's values", file, checkedFor[key])
		}
	}
}
