package main

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

func TestForget_TakesAnEntityOutAndANewCommandTracksItAgain(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)

	r := c.run("start", "c9")
	if r.err != nil || !strings.Contains(r.stderr, "c9 was not tracked before: it is now exported to the health system") || !strings.Contains(r.stderr, "maintctl forget c9") {
		t.Fatalf("a command on an entity never seen: %v\nstderr: %s", r.err, r.stderr)
	}
	if r := c.run("start", "--force", "c9"); strings.Contains(r.stderr, "not tracked") {
		t.Errorf("a second command says the entity is new: %s", r.stderr)
	}
	if r := c.run("customer-action", "--no-wait", "my cluster"); r.err != nil || !strings.Contains(r.stderr, "my cluster is not tracked") {
		t.Errorf("--no-wait on an entity never seen: %v\n%s", r.err, r.stderr)
	}

	r = c.run("forget", "c9")
	if r.code() != exitRejected || !strings.Contains(r.stdout, "RequestNotAllowed") {
		t.Fatalf("forget while updating: exit %d\n%s", r.code(), r.stdout)
	}
	out := c.ok("forget", "--force", "--reason", "typo", "c9")
	mustContain(t, "forget", out, "applied Forget: Unplanned → None (forced)", "out of the signal from the next tick", "forgotten at")
	// "my cluster"'s command was not waited for (--no-wait): it is listed once applied.
	var listed string
	testenv.Eventually(t, 10*time.Second, "the list after forget: my cluster, no c9", func() bool {
		listed = c.ok("list", "-o", "name")
		return strings.Contains(listed, "my cluster")
	})
	if strings.Contains(listed, "c9") {
		t.Errorf("list after forget:\n%s", listed)
	}
	mustContain(t, "list --forgotten", c.ok("list", "--forgotten"), "c9", "(forgotten)")
	rec := decodeJSON[recordJSON](t, c.ok("get", "-o", "json", "c9"))
	if rec.Tracked || !rec.Exists || rec.ForgottenAt.IsZero() || rec.Reason != "typo" {
		t.Errorf("get -o json of a forgotten entity: %+v", rec)
	}
	if evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", "c9")); len(evs) != 4 || evs[3].Task != domain.TaskForget {
		t.Errorf("history after forget: %+v", evs)
	}

	// A later command tracks it again, from None, and says so.
	r = c.run("pending", "c9")
	if r.err != nil || !strings.Contains(r.stdout, "applied Pending: None → Pending") || !strings.Contains(r.stderr, "was not tracked before") {
		t.Errorf("pending after forget: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
}

func TestList_FleetFilters(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	id := func(rg, name string) string {
		return "/subscriptions/0b1f/resourceGroups/" + rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
	}
	c.ok("pending", "--window-start", "+3d", "--window-end", "+3d4h", id("rg-1", "soon"))
	c.ok("pending", "--window-start", "+30d", "--window-end", "+30d4h", id("rg-2", "later"))
	c.ok("start", id("rg-1", "busy"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", "name"}, id("rg-1", "busy") + "\n" + id("rg-1", "soon") + "\n" + id("rg-2", "later") + "\n"},
		{[]string{"list", "-o", "name", "--prefix", "/SUBSCRIPTIONS/0b1f/resourcegroups/rg-1/"}, id("rg-1", "busy") + "\n" + id("rg-1", "soon") + "\n"},
		{[]string{"list", "-o", "name", "--updating"}, id("rg-1", "busy") + "\n"},
		{[]string{"list", "-o", "name", "--window-before", "+1w"}, id("rg-1", "soon") + "\n"},
		{[]string{"list", "-o", "name", "--state", "pending", "--window-before", "2099-01-01"}, id("rg-1", "soon") + "\n" + id("rg-2", "later") + "\n"},
		{[]string{"list", "--no-headers", "--state", "pending", "--prefix", id("rg-2", "")}, ""},
	} {
		got := c.ok(tc.args...)
		if tc.want == "" {
			if !strings.HasPrefix(got, "rg-2/later ") || strings.Count(got, "\n") != 1 {
				t.Errorf("%v:\n%s", tc.args, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%v:\n%s\nwant:\n%s", tc.args, got, tc.want)
		}
	}
	mustContain(t, "list -o wide", c.ok("list", "-o", "wide"), "WINDOW START", "REASON", "RESOURCE ID", id("rg-2", "later"))
	if out := c.ok("list", "--prefix", "/nowhere"); !strings.Contains(out, "no entity matches") {
		t.Errorf("list --prefix /nowhere: %q", out)
	}

	// The fleet's history: bounded, newest kept, what was left out said on stderr.
	r := c.run("history", "--limit", "2")
	if r.err != nil || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stdout, "rg-1/busy") || !strings.Contains(r.stderr, "1 older events not shown") {
		t.Errorf("history --limit 2: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if evs := decodeJSON[[]domain.Event](t, c.ok("history", "--since", "0", "--limit", "0", "-o", "json")); len(evs) != 3 {
		t.Errorf("history --since 0 --limit 0: %d events, want 3", len(evs))
	}
	if out := c.ok("history", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); !strings.Contains(out, "no outcome event in this period") {
		t.Errorf("history since an hour ahead: %q", out)
	}
	if r := c.run("history", "--since", "yesterday"); r.err == nil || !strings.Contains(r.err.Error(), "RFC 3339") {
		t.Errorf("history --since yesterday: %v", r.err)
	}
}

func TestDurationsAndDates(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	mustContain(t, "provision --help", c.ok("provision", "--help"), "(default 400d)")
	mustContain(t, "up --help", c.ok("up", "--help"), "--retention duration", "(default 1d)", "--stuck-after duration", "(default 6h)")
	c.ok("provision", "--partitions", "2", "--events-retention", "400d", "--tick", "1m")
	rec := decodeJSON[struct{ Record recordJSON }](t, c.ok("pending", "-o", "json", "--timeout", "1d", "--window-start", "2030-12-14", "--window-end", "2030-12-14T06:00:00Z", testID))
	if w := rec.Record.Window; w == nil || !w.Start.Equal(time.Date(2030, 12, 14, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("window %+v, want from midnight UTC", w)
	}
	if r := c.run("pending", "--window-start", "+2w", "--window-end", "+2w1d", testID); r.err != nil {
		t.Errorf("weeks and days in +DURATION: %v", r.err)
	}
	if r := c.run("provision", "--events-retention", "400days"); r.err == nil || !strings.Contains(r.err.Error(), "invalid duration") {
		t.Errorf("--events-retention 400days: %v", r.err)
	}
}
