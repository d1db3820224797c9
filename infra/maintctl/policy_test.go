package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/policies"
	"maintsignals/test/testenv"
)

// startPolicies runs the policies function in the test process against the stack.
func startPolicies(t *testing.T, s *stack) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- policies.Run(ctx, s.JS, policies.Config{Log: testenv.Quiet()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("policies function: %v", err)
		}
	})
}

// nextLocal is the first day at least days from now that falls on wd, at 22:00 in loc, in UTC.
func nextLocal(t *testing.T, loc *time.Location, days int, wd time.Weekday) time.Time {
	t.Helper()
	d := time.Now().In(loc).AddDate(0, 0, days)
	for d.Weekday() != wd {
		d = d.AddDate(0, 0, 1)
	}
	return time.Date(d.Year(), d.Month(), d.Day(), 22, 0, 0, 0, loc).UTC()
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// TestPolicy_SetCheckAnnounceRescheduleDelete is the customer's policy through maintctl: set by
// flags, read back, a window it refuses (check says why and what is next; pending is refused
// naming the next allowed start), the next allowed one announced, then moved by reschedule,
// a malformed policy refused with its target, and the policy deleted.
func TestPolicy_SetCheckAnnounceRescheduleDelete(t *testing.T) {
	s := startStack(t, stackOpts{})
	startPolicies(t, s)
	c := newCLI(t, s)
	const rg = "/subscriptions/0b1f/resourceGroups/rg-1"
	id := rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}

	out := c.ok("policy", "set", rg, "--time-zone", "Europe/Berlin", "--window", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h",
		"--blackout", "2031-12-20 2032-01-04 holiday freeze", "--min-notice", "72h", "--allow-reschedule")
	mustContain(t, "policy set", out, "applied set of the policy of "+rg, "revision")
	mustContain(t, "policy get", c.ok("policy", "get", rg), "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR from 22:00 for 6h", "Europe/Berlin", "holiday freeze", "72h", "allowed", "next window")
	var got policyJSON
	if err := json.Unmarshal([]byte(c.ok("policy", "get", "-o", "json", rg)), &got); err != nil || got.Level != "resource group" || got.Policy.MinNotice != "72h" || got.Actor != "sre-test" {
		t.Errorf("policy get -o json: %+v, %v", got, err)
	}
	mustContain(t, "policy list", c.ok("policy", "list"), "SCOPE", rg, "resource group", "Europe/Berlin")

	sat := nextLocal(t, berlin, 5, time.Saturday)
	r := c.run("policy", "check", id, "--window-start", rfc(sat), "--window-end", rfc(sat.Add(4*time.Hour)))
	if r.code() != exitRejected {
		t.Fatalf("policy check of a Saturday: exit %d (%v)\n%s", r.code(), r.err, r.stdout)
	}
	mustContain(t, "policy check", r.stdout, "not allowed: InvalidParameter (window)", "policy of "+rg, "next allowed window of 4h")
	r = c.run("pending", id, "--window-start", rfc(sat), "--window-end", rfc(sat.Add(4*time.Hour)))
	if r.code() != exitRejected || !strings.Contains(r.stdout, "the next allowed start of a 4h0m0s window is") {
		t.Fatalf("pending on a Saturday: exit %d\n%s", r.code(), r.stdout)
	}

	mon := nextLocal(t, berlin, 5, time.Monday)
	mustContain(t, "policy check", c.ok("policy", "check", id, "--window-start", rfc(mon), "--window-end", rfc(mon.Add(4*time.Hour))), "\nallowed\n")
	mustContain(t, "pending", c.ok("pending", id, "--window-start", rfc(mon), "--window-end", rfc(mon.Add(4*time.Hour))), "applied Pending: None → Pending")

	tue := mon.Add(24 * time.Hour)
	out = c.ok("reschedule", id, "--window-start", rfc(tue))
	mustContain(t, "reschedule", out, "applied Reschedule: Pending → Pending", "window", rfc(tue)+" → "+rfc(tue.Add(4*time.Hour)))

	r = c.run("policy", "set", rg, "--window", "FREQ=HOURLY 22:00 6h")
	if r.code() != exitRejected || !strings.Contains(r.stdout, "InvalidParameter (windows[0].rrule)") {
		t.Errorf("malformed policy: exit %d\n%s", r.code(), r.stdout)
	}
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"minNotice": "24h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := c.run("policy", "set", rg, "--file", file, "--min-notice", "1h"); r.err == nil || !strings.Contains(r.err.Error(), "give the policy one way") {
		t.Errorf("--file with flags: %v", r.err)
	}
	mustContain(t, "policy set --file", c.ok("policy", "set", rg, "--file", file), "applied set")
	mustContain(t, "policy delete", c.ok("policy", "delete", rg), "applied delete of the policy of "+rg)
	if r := c.run("policy", "get", rg); r.err == nil || !strings.Contains(r.err.Error(), "has no policy") {
		t.Errorf("policy get after delete: %v", r.err)
	}
	// watch shows the entities' events, not the policy commands' outcomes.
	w := c.ok("watch", "--since", "1h", "--no-follow", "-o", "json")
	mustContain(t, "watch", w, `"task":"Reschedule"`)
	if strings.Contains(w, `"scope"`) {
		t.Errorf("watch shows policy outcomes:\n%s", w)
	}
	mustContain(t, "policy check without a policy", c.ok("policy", "check", id, "--window-start", rfc(sat), "--window-end", rfc(sat.Add(4*time.Hour))), "no policy covers it", "allowed")
}
