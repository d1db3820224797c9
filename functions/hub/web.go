package hub

import (
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
)

// readTimeout bounds one read of the view for a request.
const readTimeout = 5 * time.Second

// NewHandler serves the regions' view: GET /api/v1/regions (JSON), GET /regions (a page, or
// JSON to Accept: application/json), an entity's record read in its region
// (GET /regions/{region}/entity?id=ID); / leads to /regions.
func NewHandler(read Reader, record RecordReader, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	entity := func(w http.ResponseWriter, r *http.Request) { serveEntity(w, r, record, log) }
	mux.HandleFunc("GET /regions/{region}/entity", entity)
	mux.HandleFunc("GET /regions/entity", entity) // the page's form: ?region=&id=
	mux.HandleFunc("GET /api/v1/regions", func(w http.ResponseWriter, r *http.Request) {
		serveView(w, r, read, log, false)
	})
	mux.HandleFunc("GET /regions", func(w http.ResponseWriter, r *http.Request) {
		serveView(w, r, read, log, !strings.Contains(r.Header.Get("Accept"), "application/json"))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/regions", http.StatusFound)
	})
	return mux
}

func serveView(w http.ResponseWriter, r *http.Request, read Reader, log *slog.Logger, html bool) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	v, err := read(ctx)
	if err != nil {
		log.Warn("regions not read", "err", err)
		http.Error(w, "regions not read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if !html {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := page.Execute(w, pageData{View: v, States: domain.States}); err != nil {
		log.Warn("regions page not written", "err", err)
	}
}

type pageData struct {
	regions.View
	States []domain.State
}

var page = template.Must(template.New("regions").Funcs(template.FuncMap{
	"count": func(c regions.Counts, s domain.State) int64 { return c.Counts[s] },
	"age": func(a *float64) string {
		if a == nil {
			return "never heard of"
		}
		return (time.Duration(*a) * time.Second).String()
	},
	"asOf": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Regions · Maintenance Signals</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse}
th,td{padding:.3rem .7rem;border-bottom:1px solid #ccc;text-align:right}th:first-child,td:first-child{text-align:left}
.stale{background:#fde2e1}</style></head>
<body><h1>Regions</h1>
{{if .StaleRegions}}<p role="alert">Stale: {{range $i, $r := .StaleRegions}}{{if $i}}, {{end}}{{$r}}{{end}} (summary older than two of the region's ticks; out of the totals)</p>{{end}}
<table><caption>Each region as of the tick time in its newest summary</caption>
<thead><tr><th scope="col">Region</th><th scope="col">As of</th><th scope="col">Age</th><th scope="col">Status</th>
{{range .States}}<th scope="col">{{.}}</th>{{end}}<th scope="col">Updating</th><th scope="col">Overdue</th><th scope="col">Stuck</th><th scope="col">Conflicts</th></tr></thead>
<tbody>{{range .Regions}}{{$r := .}}<tr{{if .Stale}} class="stale"{{end}}><th scope="row">{{.Region}}</th><td>{{asOf .AsOf}}</td><td>{{age .AgeSeconds}}</td><td>{{if .Stale}}stale{{else}}fresh{{end}}</td>
{{range $.States}}<td>{{count $r.Counts .}}</td>{{end}}<td>{{.Updating}}</td><td>{{.Overdue}}</td><td>{{.Stuck}}</td><td>{{.Conflicts}}</td></tr>{{end}}</tbody>
<tfoot><tr><th scope="row">Fresh regions</th><td></td><td></td><td></td>{{range .States}}<td>{{count $.Totals .}}</td>{{end}}<td>{{.Totals.Updating}}</td><td>{{.Totals.Overdue}}</td><td>{{.Totals.Stuck}}</td><td>{{.Totals.Conflicts}}</td></tr></tfoot>
</table>
<form action="/regions/entity" method="get"><h2>An entity's record, read in its region</h2>
<label>Region <select name="region">{{range .Regions}}<option>{{.Region}}</option>{{end}}</select></label>
<label>Resource ID <input name="id" size="80" required></label> <button>Read</button></form>
</body></html>
`))
