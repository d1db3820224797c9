package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	core "maintsignals/shared/campaign"
)

// campaignVar is the campaigns dashboard's variable: a campaign id, as the burndown carries it.
const campaignVar = "campaign"

// The campaign function's metrics under Prometheus 3's OTLP names.
const (
	campaignEntities = `cluster_maintenance_campaign_entities`
	campaignStatus   = `cluster_maintenance_campaign_status_ratio`
	campaignDeadline = `cluster_maintenance_campaign_deadline_seconds`
)

// campaignSel selects the series of the chosen campaign.
const campaignSel = `maintenance_campaign_id="$` + campaignVar + `"`

// phasesOf is the regular expression of the phases that keep holds for.
func phasesOf(keep func(core.Phase) bool) string {
	var out []string
	for _, p := range core.Phases {
		if keep(p) {
			out = append(out, string(p))
		}
	}
	return strings.Join(out, "|")
}

// perPhase is the burndown of the campaigns that sel selects, per campaign and phase. A
// replica that took over the ticks may export the same campaign for a while: max keeps one.
func perPhase(sel string) string {
	return `max by (maintenance_campaign_id, maintenance_campaign_phase) (` + campaignEntities + `{` + sel + `})`
}

// countOf is the entities per campaign in the phases that keep holds for (every phase: the
// selection).
func countOf(sel string, keep func(core.Phase) bool) string {
	if keep != nil {
		sel = strings.TrimPrefix(sel+`, maintenance_campaign_phase=~"`+phasesOf(keep)+`"`, ", ")
	}
	return `sum by (maintenance_campaign_id) (` + perPhase(sel) + `)`
}

// statusIs is 1 for every campaign whose current status matches the regular expression.
func statusIs(re string) string {
	return `max by (maintenance_campaign_id) (` + campaignStatus + `{maintenance_campaign_status=~"` + re + `"}) == 1`
}

// running are the statuses of a campaign still under way.
const running = "active|paused|halted"

// atRisk is the MaintenanceCampaignDeadlineAtRisk alert: less than 24 h to a running
// campaign's deadline with more than a tenth of its selection not done; the value is the
// share not done.
func atRisk() string {
	return `((1 - ` + countOf("", core.Phase.Done) + ` / ` + countOf("", nil) + `) > 0.1)` +
		` and on (maintenance_campaign_id) (max by (maintenance_campaign_id) (` + campaignDeadline + `) - time() < 86400)` +
		` and on (maintenance_campaign_id) (` + statusIs(running) + `)`
}

// phaseColors and statusColors are the colours of the phases and statuses on every panel.
var (
	phaseColors = map[core.Phase]string{
		core.PhasePlanned: "blue", core.PhaseAnnounced: "yellow", core.PhaseInProgress: "purple",
		core.PhaseSucceeded: "green", core.PhaseFailed: "red", core.PhaseSkipped: "#8f8f8f",
		core.PhaseRejected: "dark-red", core.PhaseSuperseded: "light-blue", core.PhaseCleared: "semi-dark-green",
		core.PhaseCancelled: "#b7b7b7", core.PhaseOverdue: "orange",
	}
	statusColors = map[core.Status]string{
		core.StatusPlanning: "purple", core.StatusActive: "blue", core.StatusPaused: "yellow",
		core.StatusHalted: "red", core.StatusCompleted: "green", core.StatusCancelled: "#8f8f8f",
	}
)

// burndownOrder is the phases stacked from the bottom: what is done, then what went wrong,
// then the work in flight, what is announced and, on top, what is not announced yet.
var burndownOrder = []core.Phase{
	core.PhaseSucceeded, core.PhaseSkipped, core.PhaseSuperseded, core.PhaseCleared, core.PhaseCancelled,
	core.PhaseFailed, core.PhaseRejected, core.PhaseOverdue,
	core.PhaseInProgress, core.PhaseAnnounced, core.PhasePlanned,
}

// Campaigns is the fleet campaigns: every campaign's status and progress with what needs a
// person (halted, deadlines at risk, the campaign function not running), and the burndown of
// the chosen one per phase.
func Campaigns() (dashboard.Dashboard, error) {
	l := &layout{}
	d := base(CampaignsUID, "Maintenance Signals / Campaigns",
		"Fleet campaigns: the status and progress of each, what needs attention, and the chosen campaign's entities per phase over time (the burndown).").
		WithVariable(labelVariable(campaignVar, "Campaign", campaignStatus, "maintenance_campaign_id"))

	d.WithRow(l.row("All campaigns"))
	now := l.line(4, 6, 6, 6, 6)
	d.WithPanel(statPanel(now[0], "Campaigns under way", "Campaigns active, paused or halted.",
		`count(`+statusIs(running)+`) or vector(0)`, "short", thresholds("blue")))
	d.WithPanel(statPanel(now[1], "Halted campaigns", "Campaigns halted because a wave's failures passed its failureThreshold (the MaintenanceCampaignHalted alert): nothing more is announced until maintctl campaign resume.",
		`count(`+statusIs(string(core.StatusHalted))+`) or vector(0)`, "short", thresholds("green", above(1, "red"))))
	d.WithPanel(statPanel(now[2], "Deadlines at risk", "Campaigns under way with less than 24 h to their deadline and more than a tenth of their entities not done (the MaintenanceCampaignDeadlineAtRisk alert).",
		`count(`+atRisk()+`) or vector(0)`, "short", thresholds("green", above(1, "orange"))))
	d.WithPanel(statPanel(now[3], "Since the last campaign pass", "Time since any campaign function replica last completed a pass over the campaigns. Above three ticks (three minutes by default) nothing is announced or tracked (the MaintenanceCampaignFunctionNotRunning alert).",
		`time() - max(cluster_maintenance_campaign_last_run_seconds)`, "s", thresholds("green", above(120, "orange"), above(180, "red"))))
	all := l.line(9, 16, 8)
	d.WithPanel(campaignsTable(all[0]))
	d.WithPanel(series(all[1], "Campaign function passes", "Passes over the campaigns per minute by outcome: success, failure (the next tick carries on), or skipped because a newer tick was waiting.", "opm",
		query("A", `60 * sum by (outcome) (rate(cluster_maintenance_campaign_runs_total[$__rate_interval]))`, "{{outcome}}")))

	d.WithRow(l.row("Campaign $" + campaignVar))
	one := l.line(4, 4, 4, 4, 4, 4, 4)
	d.WithPanel(newStat(one[0], "Status", "The campaign's status in the last export.",
		instant("A", `max by (maintenance_campaign_status) (`+campaignStatus+`{`+campaignSel+`} == 1)`, "{{maintenance_campaign_status}}")).
		TextMode(common.BigValueTextModeName).
		ColorMode(common.BigValueColorModeBackground).
		Thresholds(thresholds("text")).
		Overrides(colorOverrides(statusNames())))
	d.WithPanel(statPanel(one[1], "Entities", "The campaign's selection: every entity, in every phase.",
		`sum(`+perPhase(campaignSel)+`)`, "short", thresholds("blue")))
	d.WithPanel(statPanel(one[2], "Done", "Share of the selection done: succeeded, skipped, superseded, cleared or cancelled.",
		`sum(`+perPhase(campaignSel+`, maintenance_campaign_phase=~"`+phasesOf(core.Phase.Done)+`"`)+`) / sum(`+perPhase(campaignSel)+`)`,
		"percentunit", thresholds("blue")))
	d.WithPanel(statPanel(one[3], "Not finished", "Entities neither done nor failed: what the campaign still waits for.",
		`sum(`+perPhase(campaignSel)+`) - sum(`+perPhase(campaignSel+`, maintenance_campaign_phase=~"`+phasesOf(core.Phase.Finished)+`"`)+`)`,
		"short", thresholds("blue")))
	d.WithPanel(statPanel(one[4], "Failed", "Entities whose update failed (maintctl campaign retry ID --phase failed plans them anew).",
		`sum(`+perPhase(campaignSel+`, maintenance_campaign_phase="failed"`)+`)`, "short", thresholds("green", above(1, "red"))))
	d.WithPanel(timeStat(one[5], "Deadline", "The campaign's deadline: every window ends before it.",
		`1000 * max(`+campaignDeadline+`{`+campaignSel+`})`, "dateTimeFromNow"))

	phases := l.line(4, 24)
	d.WithPanel(newStat(phases[0], "Entities per phase", "The campaign's entities in each phase now: planned (a window, not announced yet), announced, in progress, succeeded, failed, skipped (no slot, or no wave), rejected, superseded, cleared, cancelled, overdue.",
		instant("A", `max by (maintenance_campaign_phase) (`+campaignEntities+`{`+campaignSel+`})`, "{{maintenance_campaign_phase}}")).
		Unit("short").
		TextMode(common.BigValueTextModeValueAndName).
		ColorMode(common.BigValueColorModeBackground).
		Thresholds(thresholds("text")).
		Overrides(colorOverrides(phaseNames())))

	over := l.line(10, 24)
	d.WithPanel(burndownPanel(over[0]))
	trend := l.line(8, 12, 12)
	d.WithPanel(series(trend[0], "Burndown", "Entities not finished (neither done nor failed), done, and failed over time: a campaign is completed when nothing is left unfinished.", "short",
		query("A", `sum(`+perPhase(campaignSel)+`) - sum(`+perPhase(campaignSel+`, maintenance_campaign_phase=~"`+phasesOf(core.Phase.Finished)+`"`)+`)`, "not finished"),
		query("B", `sum(`+perPhase(campaignSel+`, maintenance_campaign_phase=~"`+phasesOf(core.Phase.Done)+`"`)+`)`, "done"),
		query("C", `sum(`+perPhase(campaignSel+`, maintenance_campaign_phase="failed"`)+`)`, "failed")).
		OverrideByName("done", []dashboard.DynamicConfigValue{fixedColor("green")}).
		OverrideByName("failed", []dashboard.DynamicConfigValue{fixedColor("red")}).
		OverrideByName("not finished", []dashboard.DynamicConfigValue{fixedColor("blue")}))
	d.WithPanel(statusTimeline(trend[1]))
	return build(d)
}

// campaignsTable lists every campaign exported: its status, its selection, the share done and
// its deadline, four instant queries merged into one row per campaign.
func campaignsTable(pos dashboard.GridPos) *table.PanelBuilder {
	return table.NewPanelBuilder().
		GridPos(pos).
		Title("Campaigns").
		Description("Every campaign the campaign function exports (finished ones for a week): its status, entities, the share done and its deadline. A click on an id shows that campaign below.").
		Datasource(datasource).
		WithTarget(tableQuery("A", `max by (maintenance_campaign_id, maintenance_campaign_status) (`+campaignStatus+` == 1)`)).
		WithTarget(tableQuery("B", countOf("", nil))).
		WithTarget(tableQuery("C", countOf("", core.Phase.Done)+` / `+countOf("", nil))).
		WithTarget(tableQuery("D", `1000 * max by (maintenance_campaign_id) (`+campaignDeadline+`)`)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(organize(map[string]string{
			"maintenance_campaign_id":     "Campaign",
			"maintenance_campaign_status": "Status",
			"Value #B":                    "Entities",
			"Value #C":                    "Done",
			"Value #D":                    "Deadline",
		}, "Time", "Value #A")).
		SortBy(sortBy("Deadline", false)).
		OverrideByName("Campaign", []dashboard.DynamicConfigValue{{Id: "links", Value: []map[string]any{{
			"title": "Show this campaign",
			"url":   "/d/" + CampaignsUID + "?var-" + campaignVar + "=${__value.raw:percentencode}&${" + dsVar + ":queryparam}&${__url_time_range}",
		}}}}).
		OverrideByName("Done", []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}}).
		OverrideByName("Deadline", []dashboard.DynamicConfigValue{{Id: "unit", Value: "dateTimeAsIso"}}).
		CellHeight(common.TableCellHeightSm).
		Footer(tableFooter())
}

// burndownPanel stacks the chosen campaign's entities per phase, one query per phase so that
// the stack keeps burndownOrder: the top line is the selection, and the bands shift from the
// top (planned, announced) to the bottom (done) as the campaign goes.
func burndownPanel(pos dashboard.GridPos) *timeseries.PanelBuilder {
	var qs []*prometheus.DataqueryBuilder
	for i, p := range burndownOrder {
		qs = append(qs, query(string(rune('A'+i)),
			`max(`+campaignEntities+`{`+campaignSel+`, maintenance_campaign_phase="`+string(p)+`"})`, string(p)))
	}
	var colors [][2]string
	for _, p := range burndownOrder {
		colors = append(colors, [2]string{string(p), phaseColors[p]})
	}
	return stacked(series(pos, "Entities per phase over time", "The burndown: the campaign's entities in each phase, stacked, done at the bottom and not yet announced on top; the whole stack is the selection.", "short", qs...), colors)
}

// statusTimeline is the campaign's status over time, one line per status.
func statusTimeline(pos dashboard.GridPos) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		GridPos(pos).
		Title("Status over time").
		Description("One line per status; coloured while the campaign is in it.").
		Datasource(datasource).
		Interval(minInterval).
		WithTarget(query("A", `max by (maintenance_campaign_status) (`+campaignStatus+`{`+campaignSel+`})`, "{{maintenance_campaign_status}}")).
		Mappings(currentMapping()).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		Thresholds(thresholds("text")).
		Overrides(colorOverrides(statusNames()))
}

// phaseNames and statusNames pair each phase and status with its colour, in the contract's
// order (the JSON must not depend on a map's).
func phaseNames() [][2]string {
	var out [][2]string
	for _, p := range core.Phases {
		out = append(out, [2]string{string(p), phaseColors[p]})
	}
	return out
}

func statusNames() [][2]string {
	var out [][2]string
	for _, s := range core.Statuses {
		out = append(out, [2]string{string(s), statusColors[s]})
	}
	return out
}
