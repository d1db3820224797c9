package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

// RecordReader reads an entity's record in a region, as every reader shows it.
type RecordReader func(ctx context.Context, region, resourceID string) (fleet.Record, error)

// NewRecordReader reads records in the regions' domains through the hub's connection: the
// record stays where its region keeps it. A region that does not answer is
// client.ErrRegionUnreachable.
func NewRecordReader(js jetstream.JetStream, log *slog.Logger) RecordReader {
	return func(ctx context.Context, region, resourceID string) (fleet.Record, error) {
		cl, err := client.New(js.Conn(), log)
		if err != nil {
			return fleet.Record{}, err
		}
		if cl, err = cl.InRegion(region); err != nil {
			return fleet.Record{}, err
		}
		e, err := cl.Get(ctx, resourceID)
		if err != nil {
			return fleet.Record{}, client.RegionError(region, err)
		}
		var in fleet.InForce
		if e.Exists() {
			// A policy that cannot be read leaves the conflict false, as in the emitter.
			if p, ok, err := cl.PolicyFor(ctx, e.Record.ResourceID); err == nil && ok {
				in = fleet.InForce{Policy: p.Policy, Since: p.Revision.At}
			}
		}
		return fleet.View(e.Key, e.Revision, e.Record, time.Now(), domain.DefaultStuckAfter, in), nil
	}
}

// serveEntity answers GET /regions/{region}/entity?id=ID (or /regions/entity?region=&id=): the record read in the region, as
// a page or as JSON (Accept: application/json); 503 when the region does not answer, 400 for
// an ID or a region name that cannot be.
func serveEntity(w http.ResponseWriter, r *http.Request, read RecordReader, log *slog.Logger) {
	region, id := cmp.Or(r.PathValue("region"), r.URL.Query().Get("region")), r.URL.Query().Get("id")
	if err := domain.ValidRegion(region); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := domain.Key(id); err != nil {
		http.Error(w, "id: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	rec, err := read(ctx, region, id)
	switch {
	case errors.Is(err, client.ErrRegionUnreachable):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case err != nil:
		log.Warn("record not read", "region", region, "err", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rec)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := entityPage.Execute(w, struct {
		Region string
		fleet.Record
	}{region, rec}); err != nil {
		log.Warn("entity page not written", "err", err)
	}
}

var entityPage = template.Must(template.New("entity").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.ResourceID}} in {{.Region}} · Maintenance Signals</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem}th{text-align:left;padding-right:1rem}</style></head>
<body><p><a href="/regions">Regions</a></p><h1>{{if .ResourceID}}{{.ResourceID}}{{else}}{{.Key}}{{end}}</h1>
<p>Read in region {{.Region}}, where its record is kept{{if not .Exists}}: never seen there (None){{end}}.</p>
<table><tbody>
<tr><th scope="row">state</th><td>{{.State}}</td></tr>
<tr><th scope="row">updating</th><td>{{if .Updating}}{{.Task}}{{else}}no{{end}}</td></tr>
<tr><th scope="row">last error</th><td>{{or .LastError "-"}}</td></tr>
<tr><th scope="row">window</th><td>{{with .Window}}{{.Start}} → {{.End}}{{else}}-{{end}}</td></tr>
<tr><th scope="row">reason</th><td>{{or .Reason "-"}}</td></tr>
<tr><th scope="row">overdue, stuck, conflict</th><td>{{.Overdue}}, {{.Stuck}}, {{.Conflict}}</td></tr>
<tr><th scope="row">revision</th><td>{{.Revision}}</td></tr>
</tbody></table></body></html>
`))
