package domain_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestCheckNotice(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	pending := func(start time.Duration, force bool) domain.Command {
		return domain.Command{ID: "c", Task: domain.TaskPending, Force: force,
			Window: &domain.Window{Start: at.Add(start), End: at.Add(start + time.Hour)}}
	}
	tests := []struct {
		name   string
		cmd    domain.Command
		min    time.Duration
		refuse bool
	}{
		{"no policy", pending(time.Minute, false), 0, false},
		{"enough notice", pending(48*time.Hour, false), 24 * time.Hour, false},
		{"exactly the minimum", pending(24*time.Hour, false), 24 * time.Hour, false},
		{"too little notice", pending(24*time.Hour-time.Second, false), 24 * time.Hour, true},
		{"window in the past", pending(-time.Hour, false), time.Hour, true},
		{"forced", pending(time.Minute, true), 24 * time.Hour, false},
		{"Pending without a window", domain.Command{ID: "c", Task: domain.TaskPending}, 24 * time.Hour, false},
		{"not a Pending", domain.Command{ID: "c", Task: domain.TaskEverything}, 24 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rej := domain.CheckNotice(tt.cmd, at, tt.min)
			if (rej != nil) != tt.refuse {
				t.Fatalf("rejection %v, want refused=%v", rej, tt.refuse)
			}
			if rej != nil && (rej.Code != domain.CodeInvalidParameter || rej.Target != "window.start") {
				t.Errorf("rejection %+v, want InvalidParameter on window.start", rej)
			}
		})
	}
}

func TestNoticeID_RoundTrip(t *testing.T) {
	id := domain.NoticeID("subscriptions/s/c=2e1", domain.NoticeReminder, "wabc", 336*time.Hour)
	key, kind, series, lead, err := domain.ParseNoticeID(id)
	if err != nil || key != "subscriptions/s/c=2e1" || kind != domain.NoticeReminder || series != "wabc" || lead != 336*3600 {
		t.Fatalf("%q parsed as %q %q %q %d %v", id, key, kind, series, lead, err)
	}
	for _, bad := range []string{"", "a:b:c", "a:b:c:x", "a:b::1", "a:b:c:-1"} {
		if _, _, _, _, err := domain.ParseNoticeID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
