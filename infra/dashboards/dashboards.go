// Package dashboards generates the Grafana dashboards of Maintenance Signals with the Grafana
// Foundation SDK: the fleet overview, one entity and the campaigns. The JSON they become is
// committed beside this file (fleet.json, entity.json, campaigns.json) and shipped to
// Kubernetes by the kustomize component infra/k8s/components/dashboards; `go run ./infra/dashboards/gen` (or `task dashboards`)
// writes it again after a change, and the tests fail while the committed JSON differs.
//
// Queries use the names Prometheus 3 stores for our OTLP under its default translation
// (underscores, unit and type suffixes), the same as scraping our Prometheus page. The fleet
// gauges are exported per emitter shard, so every query of them sums.
//
// The package is kept out of maintctl's build: the SDK is large and only the generator needs it.
package dashboards

//go:generate go run ./gen -out .

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Dashboard is one generated dashboard: the file it is written to and how it is built. A new
// dashboard is one more entry in All, and its rows in the tests' expectations.
type Dashboard struct {
	File  string
	Build func() (dashboard.Dashboard, error)
}

// All is every dashboard, in the order they are written.
func All() []Dashboard {
	return []Dashboard{
		{File: "fleet.json", Build: Fleet},
		{File: "entity.json", Build: Entity},
		{File: "campaigns.json", Build: Campaigns},
	}
}

// Tag is on every dashboard; the dashboards link to each other by it.
const Tag = "maintenance-signals"

// UIDs of the dashboards, stable so that links and bookmarks keep working.
const (
	FleetUID     = "maintsignals-fleet"
	EntityUID    = "maintsignals-entity"
	CampaignsUID = "maintsignals-campaigns"
)

// Render is d's JSON as committed: indented, with a final newline.
func Render(d Dashboard) ([]byte, error) {
	dash, err := d.Build()
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.File, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	// Queries hold <, > and &: keep them readable.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(dash); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.File, err)
	}
	return buf.Bytes(), nil
}

// Write renders every dashboard into dir.
func Write(dir string) error {
	for _, d := range All() {
		b, err := Render(d)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.File), b, 0o644); err != nil {
			return fmt.Errorf("dashboard %s: %w", d.File, err)
		}
	}
	return nil
}

// The data source is a variable, so that the same JSON works against whichever Prometheus
// (or Mimir, Thanos…) holds the signal.
const dsVar = "datasource"

var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${" + dsVar + "}")}

// base is what every dashboard shares: the data source variable, links to the others, a
// minute's refresh (one tick).
func base(uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{Tag}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(dsVar).
			Label("Data source").
			Type("prometheus")).
		Link(dashboard.NewDashboardLinkBuilder("Maintenance Signals").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{Tag}).
			AsDropdown(false).
			IncludeVars(true).
			KeepTime(true))
}

// build builds d and numbers its panels and rows from 1 in order: Grafana wants ids unique
// within a dashboard, and a row's id is otherwise 0.
func build(d *dashboard.DashboardBuilder) (dashboard.Dashboard, error) {
	dash, err := d.Build()
	if err != nil {
		return dash, err
	}
	for i, p := range dash.Panels {
		id := uint32(i + 1)
		switch {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
	}
	return dash, nil
}

// query is a range query, as a time series panel runs it.
func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(ref).
		Datasource(datasource).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// instant is an instant query, for stats and tables: the value now.
func instant(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return query(ref, expr, legend).Instant()
}

// tableQuery is an instant query whose result is a table: one row per series, a column per
// label.
func tableQuery(ref, expr string) *prometheus.DataqueryBuilder {
	return instant(ref, expr, "__auto").Format(prometheus.PromQueryFormatTable)
}

// thresholds from a base colour and the steps above it.
func thresholds(baseColor string, steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().
		Mode(dashboard.ThresholdsModeAbsolute).
		Steps(append([]dashboard.Threshold{{Color: baseColor}}, steps...))
}

// above is a threshold step: color from v up.
func above(v float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: &v, Color: color}
}

// stateColors are the colours of the states, the same on every panel.
var stateColors = []struct{ state, color string }{
	{"none", "green"},
	{"pending", "yellow"},
	{"planned", "blue"},
	{"unplanned", "red"},
	{"customer_action_needed", "orange"},
}

func fixedColor(c string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": c}}
}

// layout places panels on Grafana's 24-column grid, line by line. The SDK's automatic layout
// can place a panel past the 24th column; every position here is explicit.
type layout struct{ y uint32 }

const gridWidth = 24

// row is a section header across the grid.
func (l *layout) row(title string) *dashboard.RowBuilder {
	r := dashboard.NewRowBuilder(title).GridPos(dashboard.GridPos{X: 0, Y: l.y, W: gridWidth, H: 1})
	l.y++
	return r
}

// line returns the positions of panels of widths ws side by side, h high, and moves below.
func (l *layout) line(h uint32, ws ...uint32) []dashboard.GridPos {
	var x uint32
	out := make([]dashboard.GridPos, len(ws))
	for i, w := range ws {
		out[i] = dashboard.GridPos{X: x, Y: l.y, W: w, H: h}
		x += w
	}
	if x > gridWidth {
		panic(fmt.Sprintf("dashboards: a line of widths %v is wider than %d columns", ws, gridWidth))
	}
	l.y += h
	return out
}

func ptr[T any](v T) *T { return &v }
