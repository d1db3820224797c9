package hub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/regions"
	"maintsignals/shared/store"
	"maintsignals/test/apijudge"
	"maintsignals/test/testenv"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// view is east fresh with 2 entities Pending, west heard of 5 minutes ago (a 1 minute tick),
// north never.
func view(context.Context) (regions.View, error) {
	c := map[domain.State]int64{domain.StatePending: 2}
	parts := []domain.Summary{
		{Version: 1, Region: "east", Shards: 1, At: now.Add(-10 * time.Second), TickSeconds: 60, Counts: c},
		{Version: 1, Region: "west", Shards: 1, At: now.Add(-5 * time.Minute), TickSeconds: 60, Counts: c},
	}
	return regions.Combine([]string{"east", "west", "north"}, parts, now), nil
}

func get(t *testing.T, h http.Handler, path, accept string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Result(), string(b)
}

func TestHandler_ServesTheViewAsJSONAndAsAPage(t *testing.T) {
	h := NewHandler(view, nil, testenv.Quiet())
	for _, tc := range []struct{ path, accept string }{{"/api/v1/regions", ""}, {"/regions", "application/json"}} {
		res, body := get(t, h, tc.path, tc.accept)
		var v regions.View
		if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("%s: %d %s", tc.path, res.StatusCode, body)
		}
		if strings.Join(v.StaleRegions, ",") != "west,north" || v.Totals.Counts[domain.StatePending] != 2 {
			t.Errorf("%s: %s", tc.path, body)
		}
	}
	res, page := get(t, h, "/regions", "text/html")
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{"Stale: west, north", `<tr class="stale"><th scope="row">west</th>`, "never heard of", `<th scope="row">east</th><td>2026-12-01T09:59:50Z</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page has no %q:\n%s", want, page)
		}
	}
}

// GET /api/v1/regions answers as the read API's document (infra/api/openapi.json) says, its
// failure too.
func TestHandler_AnswersAsTheAPIDocumentSays(t *testing.T) {
	b, err := os.ReadFile("../../infra/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	j, err := apijudge.New(b)
	if err != nil {
		t.Fatal(err)
	}
	failing := func(context.Context) (regions.View, error) { return regions.View{}, errors.New("no hub") }
	for _, read := range []Reader{view, failing} {
		h := NewHandler(read, nil, testenv.Quiet())
		req := httptest.NewRequest(http.MethodGet, "/api/v1/regions", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if err := j.Validate(req, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("GET /api/v1/regions: %d %s\n%v", w.Code, w.Body, err)
		}
	}
}

func TestHandler_AnswersUnavailableWhenTheViewCannotBeRead(t *testing.T) {
	h := NewHandler(func(context.Context) (regions.View, error) { return regions.View{}, errors.New("no hub") }, nil, testenv.Quiet())
	if res, _ := get(t, h, "/api/v1/regions", ""); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d", res.StatusCode)
	}
}

// The metrics carry each region heard of: its age and its entities per state; a region never
// heard of has no points.
func TestMetrics_ExportEachRegionsAgeAndEntities(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	if _, err := RegisterMetrics(mp.Meter(ScopeName), view); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ages, pending := map[string]float64{}, map[string]int64{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				r, _ := p.Attributes.Value(AttrRegion)
				ages[r.AsString()] = p.Value
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				r, _ := p.Attributes.Value(AttrRegion)
				if s, _ := p.Attributes.Value(AttrState); s.AsString() == "pending" {
					pending[r.AsString()] = p.Value
				}
			}
		}
	}
	if len(ages) != 2 || ages["east"] != 10 || ages["west"] != 300 {
		t.Errorf("ages %v, want east 10 s, west 300 s, north none", ages)
	}
	if len(pending) != 2 || pending["east"] != 2 || pending["west"] != 2 {
		t.Errorf("pending %v", pending)
	}
}

// The hub's entity page reads the record in its region's domain; a region that does not
// answer is 503.
func TestEntity_ReadsTheRecordInItsRegion(t *testing.T) {
	hub := testenv.StartHub(t)
	east := testenv.StartRegion(t, "east", hub.Server.LeafURL())
	testenv.WaitLeaf(t, hub.Server, 1)
	id := "/subscriptions/s1/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	ctx := testenv.Context(t, 10*time.Second)
	st, err := store.Open(ctx, east.JS)
	if err != nil {
		t.Fatal(err)
	}
	rec := domain.Record{ResourceID: id, State: domain.StateUnplanned, Updating: true, Task: domain.TaskEverything, StateSince: time.Now(), UpdatedAt: time.Now(), Version: domain.RecordVersion}
	if _, err := st.Put(ctx, domain.MustKey(id), store.Versioned{}, rec); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(view, NewRecordReader(hub.JS, testenv.Quiet()), testenv.Quiet())
	q := "?id=" + url.QueryEscape(id)
	res, body := get(t, h, "/regions/east/entity"+q, "application/json")
	var got fleet.Record
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.State != domain.StateUnplanned || !got.Updating {
		t.Errorf("east: %d %s", res.StatusCode, body)
	}
	if res, page := get(t, h, "/regions/entity?region=east&id="+url.QueryEscape(id), ""); res.StatusCode != http.StatusOK || !strings.Contains(page, "Unplanned") {
		t.Errorf("page: %d %s", res.StatusCode, page)
	}
	if res, body := get(t, h, "/regions/west/entity"+q, ""); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "region west unreachable") {
		t.Errorf("west: %d %s", res.StatusCode, body)
	}
	if res, _ := get(t, h, "/regions/east/entity?id=", ""); res.StatusCode != http.StatusBadRequest {
		t.Errorf("no id: %d", res.StatusCode)
	}
}
