package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
)

// entityVar is the entity dashboard's variable: the resource ID, as the signal carries it.
const entityVar = "cloud_resource_id"

// entitySel selects the series of the chosen entity.
const entitySel = `{cloud_resource_id="$` + entityVar + `"}`

// Entity is one entity: its state now and over time, since when, and its announced window.
func Entity() (dashboard.Dashboard, error) {
	l := &layout{}
	d := base(EntityUID, "Maintenance Signals / Entity",
		"One entity (a cluster, by its resource ID): its maintenance state now and over time, and its announced window.").
		WithVariable(labelVariable(entityVar, "Resource ID", "cluster_maintenance_status_ratio", "cloud_resource_id"))

	now := l.line(4, 6, 6, 6, 6)
	d.WithPanel(newStat(now[0], "State", "The entity's maintenance state in the last export.",
		instant("A", `max by (cluster_maintenance_state) (cluster_maintenance_status_ratio`+entitySel+` == 1)`, "{{cluster_maintenance_state}}")).
		TextMode(common.BigValueTextModeName).
		ColorMode(common.BigValueColorModeBackground).
		Thresholds(thresholds("text")).
		Overrides(stateOverrides()))
	d.WithPanel(timeStat(now[1], "In this state since", "When the entity entered its current state.",
		`1000 * max(cluster_maintenance_state_start_time_seconds`+entitySel+`)`, "dateTimeFromNow"))
	d.WithPanel(timeStat(now[2], "Window start", "Start of the announced window; empty when the entity has none.",
		`1000 * max(cluster_maintenance_window_start_time_seconds`+entitySel+`)`, "dateTimeAsIso"))
	d.WithPanel(timeStat(now[3], "Window end", "End of the announced window; empty when the entity has none.",
		`1000 * max(cluster_maintenance_window_end_time_seconds`+entitySel+`)`, "dateTimeAsIso"))

	over := l.line(8, 24)
	d.WithPanel(statetimeline.NewPanelBuilder().
		GridPos(over[0]).
		Title("State over time").
		Description("One line per state; coloured while the entity is in it.").
		Datasource(datasource).
		Interval(minInterval).
		WithTarget(query("A", `max by (cluster_maintenance_state) (cluster_maintenance_status_ratio`+entitySel+`)`, "{{cluster_maintenance_state}}")).
		Mappings(currentMapping()).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Thresholds(thresholds("text")).
		Overrides(stateOverrides()))

	win := l.line(8, 24)
	d.WithPanel(series(win[0], "Window over time", "The announced window as the signal carried it: a step is a new window.", "dateTimeAsIso",
		query("A", `1000 * max(cluster_maintenance_window_start_time_seconds`+entitySel+`)`, "start"),
		query("B", `1000 * max(cluster_maintenance_window_end_time_seconds`+entitySel+`)`, "end")))
	return build(d)
}

// labelVariable is a variable of the values of a label of a metric, in the time range shown.
func labelVariable(name, label, metric, labelName string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: ptr(`label_values(` + metric + `, ` + labelName + `)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// timeStat shows a time, given in milliseconds, in a date unit.
func timeStat(pos dashboard.GridPos, title, description, expr, unit string) *stat.PanelBuilder {
	return newStat(pos, title, description, instant("A", expr, "__auto")).
		Unit(unit).
		ColorMode(common.BigValueColorModeNone).
		Thresholds(thresholds("text"))
}

// currentMapping shows a state set's 1 as the current one and its 0 as nothing, for a state
// timeline of one line per state.
func currentMapping() []dashboard.ValueMapping {
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
		Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{
			"0": {Text: ptr(" "), Color: ptr("transparent"), Index: ptr[int32](0)},
			"1": {Text: ptr("current"), Index: ptr[int32](1)},
		},
	}}}
}

// stateOverrides colour each state's series by its name.
func stateOverrides() []cog.Builder[dashboard.DashboardFieldConfigSourceOverrides] {
	var pairs [][2]string
	for _, s := range stateColors {
		pairs = append(pairs, [2]string{s.state, s.color})
	}
	return colorOverrides(pairs)
}

// colorOverrides colour each series named in pairs (name, colour) by its name.
func colorOverrides(pairs [][2]string) []cog.Builder[dashboard.DashboardFieldConfigSourceOverrides] {
	var out []cog.Builder[dashboard.DashboardFieldConfigSourceOverrides]
	for _, p := range pairs {
		out = append(out, dashboard.NewDashboardFieldConfigSourceOverridesBuilder().
			Matcher(dashboard.MatcherConfig{Id: "byName", Options: p[0]}).
			Properties([]dashboard.DynamicConfigValue{fixedColor(p[1])}))
	}
	return out
}
