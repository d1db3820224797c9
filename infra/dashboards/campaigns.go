package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// The campaigns' burndown, as the campaign function exports it each tick: one gauge per
// campaign and phase (every phase, so that they sum to the selection), the status as a state
// set, the deadline. A replica that stops keeps its last points for three ticks: max over
// replicas, never a sum.
const (
	campaignPhases = `max by (maintenance_campaign_id, maintenance_campaign_phase) (cluster_maintenance_campaign_entities)`
	campaignDone   = `sum by (maintenance_campaign_id) (max by (maintenance_campaign_id, maintenance_campaign_phase) (cluster_maintenance_campaign_entities{maintenance_campaign_phase=~"succeeded|skipped|superseded|cleared|cancelled"}))`
	campaignTotal  = `sum by (maintenance_campaign_id) (` + campaignPhases + `)`
)

// Campaigns is the fleet campaigns: each one's status, share done and deadline, the halted
// ones, and its entities per phase over time (the burndown).
func Campaigns() (dashboard.Dashboard, error) {
	l := &layout{}
	d := base(CampaignsUID, "Maintenance Signals / Campaigns",
		"Fleet campaigns: each campaign's status, the share of its entities done, its deadline, the campaigns halted, and their entities per phase over time.")

	now := l.line(8, 10, 8, 6)
	d.WithPanel(series(now[0], "Done", "The share of each campaign's entities that need nothing more (succeeded, skipped, superseded, cleared, cancelled).", "percentunit",
		query("A", campaignDone+` / `+campaignTotal, "{{maintenance_campaign_id}}")).Max(1))
	d.WithPanel(campaignTable(now[1]))
	d.WithPanel(statPanel(now[2], "Campaigns halted", "Campaigns a wave's failures halted: nothing more is announced until `maintctl campaign resume` (the MaintenanceCampaignHalted alert).",
		`count(max by (maintenance_campaign_id) (cluster_maintenance_campaign_status_ratio{maintenance_campaign_status="halted"} == 1)) or vector(0)`, "short", thresholds("green", above(1, "orange"))))

	burn := l.line(10, 24)
	d.WithPanel(series(burn[0], "Entities per phase", "Each campaign's entities in each phase over time, stacked per campaign: the burndown. The phases sum to the selection.", "short",
		query("A", campaignPhases, "{{maintenance_campaign_id}} {{maintenance_campaign_phase}}")).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		FillOpacity(30).
		LineWidth(1))
	return build(d)
}

// campaignTable lists the campaigns with their status and deadline, one row each: two
// instant queries merged by campaign.
func campaignTable(pos dashboard.GridPos) *table.PanelBuilder {
	return table.NewPanelBuilder().
		GridPos(pos).
		Title("Campaigns").
		Description("Each campaign with its status (halted: a wave failed past its threshold; resume is explicit) and its deadline.").
		Datasource(datasource).
		WithTarget(tableQuery("A", `max by (maintenance_campaign_id, maintenance_campaign_status) (cluster_maintenance_campaign_status_ratio == 1)`)).
		WithTarget(tableQuery("B", `1000 * max by (maintenance_campaign_id) (cluster_maintenance_campaign_deadline_seconds)`)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(organize(map[string]string{
			"maintenance_campaign_id":     "Campaign",
			"maintenance_campaign_status": "Status",
			"Value #B":                    "Deadline",
		}, "Time", "Value #A")).
		OverrideByName("Deadline", []dashboard.DynamicConfigValue{{Id: "unit", Value: "dateTimeAsIso"}}).
		SortBy(sortBy("Deadline", false)).
		CellHeight(common.TableCellHeightSm).
		Footer(tableFooter())
}
