package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/test/testenv"
)

// startCampaigns runs the campaign function in the test process against the stack.
func startCampaigns(t *testing.T, s *stack) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- campaign.Run(ctx, s.JS, campaign.Config{Logger: testenv.Quiet()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("campaign function: %v", err)
		}
	})
}

// writeList writes n resource IDs to a list file, with a comment and a blank line.
func writeList(t *testing.T, n int) (string, []string) {
	t.Helper()
	var ids []string
	var b strings.Builder
	b.WriteString("# clusters of the upgrade\n\n")
	for i := range n {
		id := fmt.Sprintf("/subscriptions/sub-%d/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%03d", i%4, i)
		ids = append(ids, id)
		b.WriteString(id + "\n")
	}
	path := filepath.Join(t.TempDir(), "clusters.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, ids
}

// The campaign commands as a user runs them: a dry run that writes nothing and plans what the
// campaign then does, the create, status, list, entities, and the control verbs' outcomes.
func TestCampaignCLI(t *testing.T) {
	s := startStack(t, stackOpts{})
	startCampaigns(t, s)
	c := newCLI(t, s)
	list, ids := writeList(t, 40)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(4 * time.Hour).Format(time.RFC3339)
	flags := []string{"--list", list, "--reason", "control plane upgrade", "--earliest", earliest, "--deadline", "+100h",
		"--across", "4h", "--slot", "15m", "--max-per-slot", "5", "--max-per-subscription", "2", "--announce-lead", "336h"}
	create := func(extra ...string) []string {
		return append(append([]string{"campaign", "create", "c1"}, flags...), extra...)
	}

	out := c.ok(create("--dry-run")...)
	mustContain(t, "the dry run", out, "Campaign c1: Everything on 40 entities: 40 planned, 0 skipped.", "Window starts per hour (UTC):", "Skipped: none.")
	var dry core.DryRun
	if err := json.Unmarshal([]byte(c.ok(create("--dry-run", "--plan", "-o", "json")...)), &dry); err != nil || len(dry.Plan) != 40 {
		t.Fatalf("dry run JSON: %v, %d entries", err, len(dry.Plan))
	}
	if r := c.run("campaign", "status", "c1"); r.err == nil {
		t.Fatal("the dry run created the campaign")
	}
	mustContain(t, "the create", c.ok(create()...), "applied create: campaign c1 is active (generation 1)")
	testenv.Eventually(t, 30*time.Second, "every entity announced", func() bool {
		return strings.Count(c.ok("campaign", "entities", "c1", "--phase", "announced"), "announced") == 40
	})
	var ents []entityJSON
	if err := json.Unmarshal([]byte(c.ok("campaign", "entities", "c1", "-o", "json")), &ents); err != nil || len(ents) != len(ids) {
		t.Fatalf("entities: %v, %d", err, len(ents))
	}
	planned := map[string]string{}
	for _, p := range dry.Plan {
		planned[p.ResourceID] = p.Window.Start.String()
	}
	for _, e := range ents {
		if e.Window == nil || planned[e.ResourceID] != e.Window.Start.String() {
			t.Errorf("%s: window %+v, the dry run planned %s", e.ResourceID, e.Window, planned[e.ResourceID])
		}
	}
	var r core.Report
	if err := json.Unmarshal([]byte(c.ok("campaign", "status", "c1", "-o", "json")), &r); err != nil || r.Entities != 40 || r.ID != "c1" {
		t.Fatalf("status JSON: %v %+v", err, r)
	}
	mustContain(t, "the status", c.ok("campaign", "status", "c1"), "c1: active, generation 1", "40: 0 done")
	// The command function applies the announcements in a moment: then the record names its
	// campaign, and get shows its phase there.
	testenv.Eventually(t, 30*time.Second, "an entity's record shows its campaign phase", func() bool {
		return strings.Contains(c.ok("get", ids[0]), "c1, generation 1: announced")
	})
	mustContain(t, "the list", c.ok("campaign", "list"), "c1", "active")
	mustContain(t, "the pause", c.ok("campaign", "pause", "c1"), "applied pause: campaign c1 is paused")
	mustContain(t, "the resume", c.ok("campaign", "resume", "c1"), "applied resume: campaign c1 is active")
	if r := c.run("campaign", "approve", "c1", "--wave", "canary"); r.code() != exitRejected || !strings.Contains(r.stdout, "InvalidParameter (wave)") {
		t.Errorf("approve of a wave it does not have: exit %d\n%s%s", r.code(), r.stdout, r.stderr)
	}
	if r := c.run("campaign", "create", "c1", "--list", list, "--earliest", earliest, "--deadline", "+100h", "--across", "8h"); r.code() != exitRejected {
		t.Errorf("another spec for c1: exit %d\n%s%s", r.code(), r.stdout, r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	w := c.runCtx(ctx, "campaign", "status", "c1", "--watch")
	if w.err != nil || !strings.Contains(w.stdout, "c1 active: 0/40 done, 0 finished; announced=40") {
		t.Errorf("watch: %v\n%s", w.err, w.stdout)
	}
}
