package dashboards_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"maintsignals/infra/dashboards"
)

// TestCommittedJSONIsGenerated regenerates every dashboard and compares it with the committed
// file: a change to the generator must come with its JSON (go run ./infra/dashboards/gen).
func TestCommittedJSONIsGenerated(t *testing.T) {
	for _, d := range dashboards.All() {
		want, err := dashboards.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(d.File)
		if err != nil {
			t.Fatalf("%s: %v (run: go run ./infra/dashboards/gen)", d.File, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes; run: go run ./infra/dashboards/gen\n%s", d.File, firstDiff(got, want))
		}
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, gl, wl)
		}
	}
	return ""
}

var registerPlugins sync.Once

// decodeStrict checks a dashboard's JSON against the SDK's schema, refusing unknown fields,
// missing required ones and wrong types, panels' options and queries included, and returns
// it decoded.
//
// Two traps of the SDK's strict decoder: it returns its list of errors as an error even when
// the list is empty; and where a nested decoder returns such an empty list (every panel,
// every query, every panel's options), the decoder takes it for a failure and leaves that
// part out of the result while reporting nothing. Its verdict is complete, its value is not:
// the value comes from the SDK's ordinary decoding.
func decodeStrict(raw []byte) (dashboard.Dashboard, error) {
	registerPlugins.Do(plugins.RegisterDefaultPlugins)
	var strict dashboard.Dashboard
	err := strict.UnmarshalJSONStrict(raw)
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		err = nil
	}
	if err != nil {
		return strict, err
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, err
	}
	return d, nil
}

// committed decodes every committed dashboard strictly.
func committed(t *testing.T) map[string]dashboard.Dashboard {
	t.Helper()
	out := map[string]dashboard.Dashboard{}
	for _, d := range dashboards.All() {
		raw, err := os.ReadFile(d.File)
		if err != nil {
			t.Fatal(err)
		}
		dash, err := decodeStrict(raw)
		if err != nil {
			t.Fatalf("%s does not decode strictly against the SDK's schema:\n%v", d.File, err)
		}
		out[d.File] = dash
	}
	return out
}

func TestCommittedJSONDecodesStrictly(t *testing.T) {
	for file, d := range committed(t) {
		if d.Uid == nil || *d.Uid == "" || d.Title == nil || len(d.Panels) == 0 {
			t.Errorf("%s: uid %v, title %v, %d panels", file, d.Uid, d.Title, len(d.Panels))
		}
		for _, p := range panels(d) {
			if p.Type == "table" || p.Type == "stat" || p.Type == "timeseries" || p.Type == "state-timeline" {
				if p.Options == nil {
					t.Errorf("%s: panel %q: options not decoded into the %s panel's type", file, title(p), p.Type)
				}
			}
			for _, q := range p.Targets {
				if _, ok := q.(*prometheus.Dataquery); !ok {
					t.Errorf("%s: panel %q: query %T is not a Prometheus query", file, title(p), q)
				}
			}
		}
	}
}

// TestStrictDecodingRefuses shows that the check above can fail: what the schema does not
// know, a missing required field and a table footer as the builder leaves it are refused.
func TestStrictDecodingRefuses(t *testing.T) {
	raw, err := os.ReadFile("fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ old, new, want string }{
		"unknown dashboard field": {`"refresh": "1m",`, `"refresh": "1m", "refersh": "1m",`, "unexpected field 'refersh'"},
		"unknown query field":     {`"refId": "A"`, `"refId": "A", "exp": "up"`, "unexpected field 'exp'"},
		"missing schemaVersion":   {`"schemaVersion": 42,`, ``, "schemaVersion: required field is missing"},
		"null footer reducer":     {`"reducer": [],`, `"reducer": null,`, "reducer"},
		"unknown panel option":    {`"showHeader": true,`, `"showHeader": true, "showHeadr": true,`, "unexpected field 'showHeadr'"},
		"wrong type in gridPos":   {`"w": 14,`, `"w": "14",`, "gridPos"},
	} {
		t.Run(name, func(t *testing.T) {
			if !bytes.Contains(raw, []byte(tc.old)) {
				t.Fatalf("fleet.json has no %q", tc.old)
			}
			_, err := decodeStrict(bytes.Replace(raw, []byte(tc.old), []byte(tc.new), 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestGrid checks the layout: every panel and row inside Grafana's 24 columns, with a size,
// no two overlapping, ids unique, titles unique (the query tests name panels by title).
func TestGrid(t *testing.T) {
	for file, d := range committed(t) {
		type box struct {
			name string
			pos  dashboard.GridPos
		}
		var boxes []box
		ids, titles := map[uint32]bool{}, map[string]bool{}
		for _, p := range d.Panels {
			var b box
			var id uint32
			switch {
			case p.RowPanel != nil:
				r := p.RowPanel
				if r.GridPos == nil || r.Collapsed || len(r.Panels) > 0 {
					t.Errorf("%s: row %q: want an open row with a position and no nested panels", file, deref(r.Title))
					continue
				}
				b, id = box{"row " + deref(r.Title), *r.GridPos}, r.Id
			case p.Panel != nil:
				if p.Panel.GridPos == nil || p.Panel.Id == nil {
					t.Errorf("%s: panel %q has no position or no id", file, title(*p.Panel))
					continue
				}
				b, id = box{title(*p.Panel), *p.Panel.GridPos}, *p.Panel.Id
				if titles[b.name] {
					t.Errorf("%s: two panels are titled %q", file, b.name)
				}
				titles[b.name] = true
			}
			if id == 0 || ids[id] {
				t.Errorf("%s: %s: id %d is zero or taken", file, b.name, id)
			}
			ids[id] = true
			if b.pos.W == 0 || b.pos.H == 0 || b.pos.X+b.pos.W > 24 {
				t.Errorf("%s: %s at %+v: empty, or past the 24 columns", file, b.name, b.pos)
			}
			for _, o := range boxes {
				if overlap(o.pos, b.pos) {
					t.Errorf("%s: %s at %+v overlaps %s at %+v", file, b.name, b.pos, o.name, o.pos)
				}
			}
			boxes = append(boxes, b)
		}
	}
}

func TestOverlapCheck(t *testing.T) {
	a := dashboard.GridPos{X: 0, Y: 0, W: 12, H: 4}
	for _, tc := range []struct {
		b    dashboard.GridPos
		want bool
	}{
		{dashboard.GridPos{X: 12, Y: 0, W: 12, H: 4}, false},
		{dashboard.GridPos{X: 0, Y: 4, W: 24, H: 1}, false},
		{dashboard.GridPos{X: 11, Y: 3, W: 2, H: 2}, true},
		{dashboard.GridPos{X: 2, Y: 1, W: 2, H: 1}, true},
	} {
		if got := overlap(a, tc.b); got != tc.want {
			t.Errorf("overlap(%+v, %+v) = %v", a, tc.b, got)
		}
	}
}

func overlap(a, b dashboard.GridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

// panels are the dashboard's panels that are not rows.
func panels(d dashboard.Dashboard) []dashboard.Panel {
	var out []dashboard.Panel
	for _, p := range d.Panels {
		if p.Panel != nil {
			out = append(out, *p.Panel)
		}
	}
	return out
}

func title(p dashboard.Panel) string { return deref(p.Title) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
