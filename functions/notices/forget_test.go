package notices_test

import (
	"testing"
	"time"

	"maintsignals/functions/notices"
	"maintsignals/shared/domain"
)

// A forgotten entity gets no notice, whatever its record still holds.
func TestDecide_NothingForAForgottenEntity(t *testing.T) {
	start := time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)
	ladder := []time.Duration{24 * time.Hour}
	recs := []domain.Record{
		{ResourceID: "/c1", State: domain.StatePending, Window: &domain.Window{Start: start, End: start.Add(time.Hour)}, StateSince: start.Add(-48 * time.Hour)},
		{ResourceID: "/c1", State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, StateSince: start.Add(-48 * time.Hour), UpdatedAt: start.Add(-48 * time.Hour)},
	}
	for _, rec := range recs {
		if _, ok := notices.Decide("c1", rec, start, ladder, time.Hour, nil); !ok {
			t.Fatalf("tracked %+v: no notice, the test proves nothing", rec)
		}
		rec.ForgottenAt = start.Add(-time.Minute)
		if n, ok := notices.Decide("c1", rec, start, ladder, time.Hour, nil); ok {
			t.Errorf("forgotten %+v: notice %+v", rec, n)
		}
	}
}
