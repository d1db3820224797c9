package policy_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

func TestCheck_TheVerdictAndTheNextAllowedWindow(t *testing.T) {
	p := customer(t)
	now := utc("2026-11-01T12:00:00Z")
	// A Saturday: outside the weekday windows; the next is Monday 22:00 Berlin after the notice.
	sat := domain.Window{Start: utc("2026-11-21T21:00:00Z"), End: utc("2026-11-22T01:00:00Z")}
	v := policy.Check(scope+"/c1", sat, p, 7, 0, now)
	if v.Allowed || v.Target != "window" || v.Scope == "" || v.Revision != 7 || v.Notice != "2w" || v.Next == nil ||
		v.Next.End.Sub(v.Next.Start) != 4*time.Hour || v.Next.Start.Before(sat.Start) {
		t.Errorf("verdict %+v", v)
	}
	if again := policy.Check(scope+"/c1", *v.Next, p, 7, 0, now); !again.Allowed {
		t.Errorf("the next allowed window is not allowed: %+v", again)
	}
	if none := policy.Check(scope+"/c1", sat, nil, 0, time.Hour, now); !none.Allowed || none.Scope != "" || none.Notice != "1h" || none.Next == nil || !none.Next.Start.Equal(sat.Start) {
		t.Errorf("no policy: %+v", none)
	}
}
