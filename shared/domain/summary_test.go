package domain_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
)

// summaryOf is the part of a record that DecodeRecordSummary reads.
func summaryOf(r domain.Record) domain.Record {
	return domain.Record{ResourceID: r.ResourceID, State: r.State, Updating: r.Updating, Task: r.Task,
		Window: r.Window, StateSince: r.StateSince, UpdatedAt: r.UpdatedAt, LastCommandSeq: r.LastCommandSeq, ForgottenAt: r.ForgottenAt}
}

func sameSummary(a, b domain.Record) bool {
	sameWindow := (a.Window == nil) == (b.Window == nil)
	if sameWindow && a.Window != nil {
		sameWindow = a.Window.Start.Equal(b.Window.Start) && a.Window.End.Equal(b.Window.End)
	}
	return a.ResourceID == b.ResourceID && a.State == b.State && a.Updating == b.Updating && a.Task == b.Task &&
		sameWindow && a.StateSince.Equal(b.StateSince) && a.UpdatedAt.Equal(b.UpdatedAt) && a.LastCommandSeq == b.LastCommandSeq &&
		a.ForgottenAt.Equal(b.ForgottenAt)
}

func TestDecodeRecordSummary_ReadsWhatAFullDecodeReads(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 30, 15, 123456789, time.UTC)
	full := domain.Record{
		ResourceID: "/subscriptions/S1/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1",
		State:      domain.StatePlanned, Updating: true, Task: domain.TaskEverything, LastError: `boom "quoted" \ back`,
		Window: &domain.Window{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)}, Reason: "kernel <update> & more",
		StateSince: now, UpdatedAt: now.Add(time.Minute), LastCommandID: "c-1", LastCommandSeq: 42, Version: domain.RecordVersion,
		LastCommandAt: now, RecentCommandIDs: []string{"a", "b", "c"}, AdmitTokens: 1.5, AdmitAt: now,
		LastEvent:  &domain.Event{CommandID: "c-1", Outcome: domain.OutcomeApplied, Message: "ok {with} [brackets]"},
		SignedUpTo: map[string]time.Time{"U1": now},
	}
	for name, tc := range map[string]struct {
		json string
		rec  *domain.Record
	}{
		"a record with every field":  {rec: &full},
		"no window, state None":      {rec: &domain.Record{ResourceID: "/c/2", State: domain.StateNone, StateSince: now, Version: 1}},
		"a forgotten entity":         {rec: &domain.Record{ResourceID: "/c/10", State: domain.StateNone, StateSince: now, ForgottenAt: now, Version: 1}},
		"an ID with escapes":         {rec: &domain.Record{ResourceID: "/c/\"quoted\"/\u00e9\\x", State: domain.StatePending}},
		"another field order":        {json: `{"state":"Unplanned","unknown":{"a":[1,2,{"b":"}"}]},"resourceId":"/c/3","lastCommandSeq":7}`},
		"spaces and a null window":   {json: " {\n \"resourceId\" : \"/c/4\" , \"window\" : null , \"updating\" : false }\n"},
		"no state":                   {json: `{"resourceId":"/c/5"}`},
		"an unknown state":           {json: `{"resourceId":"/c/6","state":"Rebooting"}`},
		"a time with an offset":      {json: `{"resourceId":"/c/7","stateSince":"2026-12-01T10:00:00+02:00"}`},
		"numbers of every shape":     {json: `{"resourceId":"/c/8","admitTokens":-1.5e-3,"version":1}`},
		"a window with extra fields": {json: `{"resourceId":"/c/9","window":{"start":"2026-12-01T10:00:00Z","note":"x","end":"2026-12-01T11:00:00Z"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			b := []byte(tc.json)
			if tc.rec != nil {
				var err error
				if b, err = domain.EncodeRecord(*tc.rec); err != nil {
					t.Fatal(err)
				}
			}
			want, err := domain.DecodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := domain.DecodeRecordSummary(b)
			if err != nil || !sameSummary(got, summaryOf(want)) {
				t.Errorf("summary %+v (%v)\nwant    %+v", got, err, summaryOf(want))
			}
			if got.LastEvent != nil || got.RecentCommandIDs != nil || got.LastError != "" {
				t.Errorf("the summary carries the history: %+v", got)
			}
		})
	}
}

func TestDecodeRecordSummary_RefusesWhatIsNotARecord(t *testing.T) {
	for _, in := range []string{"", "{oops", `{"resourceId":1}`, `[]`, `{"state":"None"} trailing`, `{"resourceId":"/c","window":{"start":"yesterday"}}`} {
		if _, err := domain.DecodeRecordSummary([]byte(in)); err == nil {
			t.Errorf("%q decoded", in)
		}
	}
}

// Whatever a full decode reads, the summary reads alike.
func FuzzDecodeRecordSummary(f *testing.F) {
	for _, s := range []string{
		`{"resourceId":"/c/1","state":"Pending","updating":false,"task":"","lastError":"","window":{"start":"2026-12-01T10:00:00Z","end":"2026-12-01T11:00:00Z"},"stateSince":"2026-12-01T08:00:00Z","updatedAt":"2026-12-01T08:00:00Z","lastCommandId":"x","lastCommandSeq":3,"version":1}`,
		`{"resourceId":"/c/\u00e9","recentCommandIds":["a","b\"c"],"lastEvent":{"commandId":"x","outcome":"applied"}}`,
		`{"state":"None","window":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := domain.DecodeRecord(b)
		if err != nil {
			return
		}
		got, err := domain.DecodeRecordSummary(b)
		if err != nil || !sameSummary(got, summaryOf(want)) {
			t.Errorf("%q: summary %+v (%v), full decode %+v", b, got, err, summaryOf(want))
		}
	})
}
