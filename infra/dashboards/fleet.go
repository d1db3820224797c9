package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// upcoming selects the window starts of the next 14 days (Prometheus has no future samples:
// the announced start is the value of a gauge).
const upcoming = `((cluster_maintenance_window_start_time_seconds > time()) < (time() + 14 * 86400))`

// pendingNow is 1 for every entity whose current state is Pending.
const pendingNow = `max by (cloud_resource_id) (cluster_maintenance_status_ratio{cluster_maintenance_state="pending"} == 1)`

// Fleet is the fleet overview: how many entities are in each state and how that changed,
// the windows of the next two weeks, what needs a person (overdue, stuck, conflicts), whether
// the signal is fresh, and what the commands did.
func Fleet() (dashboard.Dashboard, error) {
	l := &layout{}
	d := base(FleetUID, "Maintenance Signals / Fleet",
		"Maintenance state of the fleet: entities per state, the windows of the next 14 days, what needs attention, the freshness of the signal and the outcome of commands.")

	d.WithRow(l.row("Now"))
	now := l.line(4, 4, 4, 4, 4, 4, 4)
	d.WithPanel(statPanel(now[0], "Tracked entities", "Entities the signal reports, in every state (summed over the emitter's shards).",
		`sum(cluster_maintenance_entities)`, "short", thresholds("blue")))
	d.WithPanel(statPanel(now[1], "Upcoming windows", "Announced maintenance windows that start within the next 14 days.",
		`count(`+upcoming+`) or vector(0)`, "short", thresholds("blue")))
	d.WithPanel(statPanel(now[2], "Overdue", "Entities still Pending after their announced window ended: the work did not happen, or nobody reported it.",
		`sum(cluster_maintenance_overdue)`, "short", thresholds("green", above(1, "orange"))))
	d.WithPanel(statPanel(now[3], "Stuck updates", "Updates in progress for longer than the emitter's stuck limit (--stuck-after, default 6 h).",
		`sum(cluster_maintenance_stuck)`, "short", thresholds("green", above(1, "red"))))
	d.WithPanel(statPanel(now[4], "Policy conflicts", "Entities whose announced window a customer's maintenance policy, changed since the announcement, no longer allows (summed over the emitter's shards): each got a conflict notice.",
		`sum(cluster_maintenance_conflicts)`, "short", thresholds("green", above(1, "orange"))))
	d.WithPanel(statPanel(now[5], "Signal age", "Time since the last successful export of any emitter replica. At the default tick of a minute, above three minutes the health system is no longer told the state (the MaintenanceEmitterNotExporting alert).",
		`time() - max(cluster_maintenance_emitter_last_success_seconds)`, "s", thresholds("green", above(120, "orange"), above(180, "red"))))

	d.WithRow(l.row("States"))
	states := l.line(9, 24)
	d.WithPanel(statesOverTime(states[0]))

	d.WithRow(l.row("Windows"))
	win := l.line(10, 14, 10)
	d.WithPanel(upcomingWindows(win[0]))
	d.WithPanel(table.NewPanelBuilder().
		GridPos(win[1]).
		Title("Pending past their window").
		Description("Entities still Pending after their announced window ended, and by how long.").
		Datasource(datasource).
		WithTarget(tableQuery("A", `max by (cloud_resource_id) (time() - cluster_maintenance_window_end_time_seconds > 0) and on (cloud_resource_id) `+pendingNow)).
		Unit("s").
		WithTransformation(organize(map[string]string{"Value": "Overdue by"}, "Time")).
		SortBy(sortBy("Overdue by", true)).
		OverrideByName("cloud_resource_id", []dashboard.DynamicConfigValue{entityLink()}).
		CellHeight(common.TableCellHeightSm).
		Footer(tableFooter()))

	d.WithRow(l.row("Signal freshness"))
	fresh := l.line(8, 6, 6, 6, 6)
	d.WithPanel(series(fresh[0], "Time since last successful export", "Per emitter replica. Above three minutes the signal is stale.", "s",
		query("A", `time() - max by (instance) (cluster_maintenance_emitter_last_success_seconds)`, "{{instance}}")).
		Thresholds(thresholds("green", above(120, "orange"), above(180, "red"))).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)))
	d.WithPanel(series(fresh[1], "Emitter runs", "Runs per minute by outcome: success, failure, or skipped because a newer tick was waiting.", "opm",
		query("A", `60 * sum by (outcome) (rate(cluster_maintenance_emitter_runs_total[$__rate_interval]))`, "{{outcome}}")))
	d.WithPanel(series(fresh[2], "Emitter run duration", "Reading the bucket and exporting, per run. It must stay well below the tick.", "s",
		query("A", `histogram_quantile(0.5, sum by (le) (rate(cluster_maintenance_emitter_duration_seconds_bucket{outcome="success"}[$__rate_interval])))`, "p50"),
		query("B", `histogram_quantile(0.99, sum by (le) (rate(cluster_maintenance_emitter_duration_seconds_bucket{outcome="success"}[$__rate_interval])))`, "p99")))
	d.WithPanel(series(fresh[3], "Entities exported", "Entities in the last successful run of each shard, summed over the shards, against the entities tracked: a gap means part of the fleet was not exported.", "short",
		query("A", `sum(max by (cluster_maintenance_emitter_shard) (cluster_maintenance_emitter_exported))`, "exported"),
		query("B", `sum(cluster_maintenance_entities)`, "tracked")))
	cover := l.line(6, 24)
	d.WithPanel(series(cover[0], "Emitter coverage per shard", "The share of each shard that its last run sent: 1 when the run finished in time. Below 1, the runs stop short (the fleet outgrew the emitter replicas, or the collector is slow) and the entities left out change from tick to tick.", "percentunit",
		query("A", `max by (cluster_maintenance_emitter_shard) (cluster_maintenance_emitter_coverage_ratio)`, "shard {{cluster_maintenance_emitter_shard}}")))

	d.WithRow(l.row("Streams"))
	streams := l.line(8, 12, 12)
	d.WithPanel(series(streams[0], "Subjects per stream", "Subjects each stream of the product holds (the records bucket: one per entity), against nats-server's high-cardinality threshold of 1,000,000: past it the server stops writing the stream's index periodically, and a node that crashes rebuilds the stream by reading every block. The alert MaintenanceStreamNearHighCardinality fires at 80 %.", "short",
		query("A", `max by (messaging_destination_name) (cluster_maintenance_stream_subjects)`, "{{messaging_destination_name}}")).
		Thresholds(thresholds("green", above(800000, "orange"), above(1000000, "red"))).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)))
	d.WithPanel(series(streams[1], "Interior deletes per stream", "Messages removed between a stream's first and last (every overwritten record leaves one until the first sequence moves past it), against the same threshold of 1,000,000.", "short",
		query("A", `max by (messaging_destination_name) (cluster_maintenance_stream_interior_deletes)`, "{{messaging_destination_name}}")).
		Thresholds(thresholds("green", above(800000, "orange"), above(1000000, "red"))).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)))

	d.WithRow(l.row("Commands"))
	cmds := l.line(8, 6, 6, 6, 6)
	d.WithPanel(series(cmds[0], "Commands by outcome", "Commands handled per minute: applied, duplicate, rejected (with the error code) or dead-lettered (maintctl dlq list).", "opm",
		query("A", `60 * sum by (cluster_maintenance_outcome, cluster_maintenance_code) (rate(cluster_maintenance_commands_total[$__rate_interval]))`, "{{cluster_maintenance_outcome}} {{cluster_maintenance_code}}")))
	d.WithPanel(series(cmds[1], "Transitions", "State changes applied per minute, from → to.", "opm",
		query("A", `60 * sum by (cluster_maintenance_from, cluster_maintenance_to) (rate(cluster_maintenance_transitions_total[$__rate_interval]))`, "{{cluster_maintenance_from}} → {{cluster_maintenance_to}}")))
	d.WithPanel(series(cmds[2], "Messages processed", "Messages handled per minute by the functions, per stream and result (ack, retry, dead letter).", "opm",
		query("A", `60 * sum by (messaging_destination_name, maint_result) (rate(messaging_process_duration_seconds_count[$__rate_interval]))`, "{{messaging_destination_name}} {{maint_result}}")))
	d.WithPanel(series(cmds[3], "Processing time", "Time to handle one message (messaging.process.duration), per stream.", "s",
		query("A", `histogram_quantile(0.5, sum by (le, messaging_destination_name) (rate(messaging_process_duration_seconds_bucket[$__rate_interval])))`, "p50 {{messaging_destination_name}}"),
		query("B", `histogram_quantile(0.99, sum by (le, messaging_destination_name) (rate(messaging_process_duration_seconds_bucket[$__rate_interval])))`, "p99 {{messaging_destination_name}}")))

	return build(d)
}

// newStat is a stat panel of one instant query: its last value, without a graph.
func newStat(pos dashboard.GridPos, title, description string, q *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		GridPos(pos).
		Title(title).
		Description(description).
		Datasource(datasource).
		WithTarget(q).
		GraphMode(common.BigValueGraphModeNone).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

func statPanel(pos dashboard.GridPos, title, description, expr, unit string, th *dashboard.ThresholdsConfigBuilder) *stat.PanelBuilder {
	return newStat(pos, title, description, instant("A", expr, "__auto")).
		Unit(unit).
		Thresholds(th).
		ColorMode(common.BigValueColorModeBackground)
}

// minInterval is the closest two points of a time series panel may be. The signal comes once
// a minute (the tick; the SDK instruments' export interval, OTEL_METRIC_EXPORT_INTERVAL, is a
// minute too): two minutes make $__rate_interval span two exports whatever the data source's
// scrape interval is set to, so that a rate never falls into a gap between them.
const minInterval = "2m"

// series is a time series panel of range queries.
func series(pos dashboard.GridPos, title, description, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		GridPos(pos).
		Title(title).
		Description(description).
		Datasource(datasource).
		Interval(minInterval).
		Unit(unit).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true))
	// Counts and durations start at zero; times (Unix milliseconds) are far from it.
	if !strings.HasPrefix(unit, "dateTime") {
		p.Min(0)
	}
	for _, q := range queries {
		p.WithTarget(q)
	}
	return p
}

// statesOverTime stacks the entities per state: the top line is the fleet.
func statesOverTime(pos dashboard.GridPos) *timeseries.PanelBuilder {
	p := series(pos, "Entities per state", "Entities in each maintenance state over time, stacked (summed over the emitter's shards).", "short",
		query("A", `sum by (cluster_maintenance_state) (cluster_maintenance_entities)`, "{{cluster_maintenance_state}}"))
	var colors [][2]string
	for _, s := range stateColors {
		colors = append(colors, [2]string{s.state, s.color})
	}
	return stacked(p, colors)
}

// stacked stacks p's series, each named in colors (name, colour) in its colour.
func stacked(p *timeseries.PanelBuilder, colors [][2]string) *timeseries.PanelBuilder {
	p.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		FillOpacity(40).
		LineWidth(1)
	for _, c := range colors {
		p.OverrideByName(c[0], []dashboard.DynamicConfigValue{fixedColor(c[1])})
	}
	return p
}

// upcomingWindows lists the windows that start in the next 14 days with the entity's state,
// soonest first: three instant queries merged into one row per entity.
func upcomingWindows(pos dashboard.GridPos) *table.PanelBuilder {
	return table.NewPanelBuilder().
		GridPos(pos).
		Title("Windows in the next 14 days").
		Description("Announced maintenance windows that start within 14 days, soonest first, with the entity's current state.").
		Datasource(datasource).
		WithTarget(tableQuery("A", `1000 * max by (cloud_resource_id) (`+upcoming+`)`)).
		WithTarget(tableQuery("B", `1000 * max by (cloud_resource_id) (cluster_maintenance_window_end_time_seconds and on (cloud_resource_id) `+upcoming+`)`)).
		WithTarget(tableQuery("C", `max by (cloud_resource_id, cluster_maintenance_state) (cluster_maintenance_status_ratio == 1) and on (cloud_resource_id) `+upcoming)).
		// The values of A and B are times in milliseconds, as Grafana's date units expect.
		Unit("dateTimeAsIso").
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(organize(map[string]string{
			"Value #A":                  "Window start",
			"Value #B":                  "Window end",
			"cluster_maintenance_state": "State",
		}, "Time", "Value #C")).
		SortBy(sortBy("Window start", false)).
		OverrideByName("cloud_resource_id", []dashboard.DynamicConfigValue{entityLink()}).
		CellHeight(common.TableCellHeightSm).
		Footer(tableFooter())
}

// organize renames columns and hides others.
func organize(rename map[string]string, hide ...string) dashboard.DataTransformerConfig {
	excl := map[string]any{}
	for _, h := range hide {
		excl[h] = true
	}
	return dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
		"excludeByName": excl,
		"renameByName":  rename,
	}}
}

func sortBy(column string, desc bool) []cog.Builder[common.TableSortByFieldState] {
	return []cog.Builder[common.TableSortByFieldState]{
		common.NewTableSortByFieldStateBuilder().DisplayName(column).Desc(desc),
	}
}

// entityLink opens the entity dashboard on the resource of the cell.
func entityLink() dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "links", Value: []map[string]any{{
		"title": "Open the entity dashboard",
		"url":   "/d/" + EntityUID + "?var-" + entityVar + "=${__value.raw:percentencode}&${" + dsVar + ":queryparam}&${__url_time_range}",
	}}}
}

// tableFooter is the table panel's footer, off, spelt out: the builder's default has a null
// reducer, which Grafana's schema (and the SDK's strict decoding) refuses.
func tableFooter() *common.TableFooterOptionsBuilder {
	return common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{}).CountRows(false)
}
