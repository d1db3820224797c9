package domain_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestSetCloudEventHeaders(t *testing.T) {
	at := time.Date(2026, 12, 14, 2, 0, 0, 500, time.FixedZone("x", 3600))
	h := http.Header{}
	domain.SetCloudEventHeaders(h, domain.NoticeCEType("due"), "n-1", "/subscriptions/s/c1", at)
	want := map[string]string{
		"ce-specversion": "1.0", "ce-id": "n-1", "ce-source": "maintsignals", "ce-type": "io.maintsignals.notice.due",
		"ce-subject": "/subscriptions/s/c1", "ce-time": "2026-12-14T01:00:00.0000005Z", "content-type": "application/json",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// A body without a resource ID has no ce-subject at all (an empty one is invalid).
	h = http.Header{}
	domain.SetCloudEventHeaders(h, domain.OutcomeCEType(domain.OutcomeRejected), "x:1", "", at)
	if _, ok := h["Ce-Subject"]; ok || h.Get("ce-type") != domain.CETypeRejected {
		t.Fatalf("headers %v", h)
	}
	for _, o := range []domain.Outcome{domain.OutcomeApplied, domain.OutcomeRejected, domain.OutcomeDuplicate, domain.OutcomeDeadLettered} {
		if !slices.Contains(domain.CETypes, domain.OutcomeCEType(o)) {
			t.Errorf("%s: type %s not listed", o, domain.OutcomeCEType(o))
		}
	}
	for _, k := range []string{"reminder", "due", "overdue", "stuck", "conflict"} {
		if !slices.Contains(domain.CETypes, domain.NoticeCEType(k)) {
			t.Errorf("%s: type %s not listed", k, domain.NoticeCEType(k))
		}
	}
}
