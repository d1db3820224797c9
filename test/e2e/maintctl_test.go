package e2e

import (
	"context"
	"encoding/json"
	"io"
	"maintsignals/test/testenv"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const clusterID = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

// record is what the test reads of `maintctl get -o json`, declared here so that the test
// checks the documented JSON rather than the project's types.
type record struct {
	ResourceID string `json:"resourceId"`
	Key        string `json:"key"`
	Exists     bool   `json:"exists"`
	State      string `json:"state"`
	Updating   bool   `json:"updating"`
	Task       string `json:"task"`
	LastError  string `json:"lastError"`
	Reason     string `json:"reason"`
}

type event struct {
	CommandID string `json:"commandId"`
	Task      string `json:"task"`
	Outcome   string `json:"outcome"`
	From      string `json:"from"`
	To        string `json:"to"`
	Code      string `json:"code"`
	Actor     string `json:"actor"`
	Reason    string `json:"reason"`
}

func getRecord(t *testing.T, url, id string) record {
	t.Helper()
	out := ok(t, url, "get", "-o", "json", id)
	var r record
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("get -o json is not JSON: %v\n%s", err, out)
	}
	return r
}

func history(t *testing.T, url, id string) []event {
	t.Helper()
	out := ok(t, url, "history", "-o", "json", id)
	var evs []event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("history -o json is not JSON: %v\n%s", err, out)
	}
	return evs
}

func TestUpVerbsAndRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	port := testenv.FreePort(t)
	up := startUp(t, port, data)
	mustContain(t, "up output", up.out.String(), "provisioned:", "MAINT_COMMANDS", "created", "metrics: http://127.0.0.1:")
	url := up.URL

	out := ok(t, url, "pending", "--reason", "planned upgrade", clusterID, "--window-start", "+1h", "--window-end", "+3h")
	mustContain(t, "pending", out, "applied Pending: None → Pending", "planned upgrade")
	out = ok(t, url, "start", "--task", "OperatorUpdate", clusterID)
	mustContain(t, "start", out, "Pending → Planned", "yes, task OperatorUpdate")
	out = ok(t, url, "succeeded", clusterID)
	mustContain(t, "succeeded", out, "Planned → None")

	// Nothing is updating now: UpdateSucceeded is refused and maintctl says why.
	r := maintctl(t, url, "succeeded", clusterID)
	if r.code == 0 {
		t.Fatalf("succeeded with nothing updating exited 0:\n%s", r.stdout)
	}
	mustContain(t, "rejected succeeded (stderr)", r.stderr, "error:", "RequestNotAllowed", "no update is in progress")
	mustContain(t, "rejected succeeded (stdout)", r.stdout, "rejected UpdateSucceeded")

	rec := getRecord(t, url, clusterID)
	if !rec.Exists || rec.State != "None" || rec.Updating || rec.ResourceID != clusterID {
		t.Errorf("get after the update: %+v", rec)
	}

	wantHistory := func(when string) {
		t.Helper()
		evs := history(t, url, clusterID)
		var got []string
		for _, ev := range evs {
			got = append(got, ev.Task+":"+ev.Outcome)
			if ev.Actor != "e2e-sre" {
				t.Errorf("%s: event %+v has actor %q, want $USER", when, ev, ev.Actor)
			}
		}
		want := "Pending:applied OperatorUpdate:applied UpdateSucceeded:applied UpdateSucceeded:rejected"
		if strings.Join(got, " ") != want {
			t.Errorf("%s: history = %v, want %s", when, got, want)
		}
	}
	wantHistory("before restart")
	table := ok(t, url, "history", clusterID)
	mustContain(t, "history table", table, "None → Pending", "Pending → Planned", "Planned → None", "RequestNotAllowed", "planned upgrade")

	// Leave an update in progress across the restart.
	ok(t, url, "start", clusterID)
	up.stop()

	up = startUp(t, port, data)
	mustContain(t, "second up", up.out.String(), "unchanged")
	rec = getRecord(t, url, clusterID)
	if rec.State != "Unplanned" || !rec.Updating || rec.Task != "Everything" {
		t.Errorf("get after restart: %+v", rec)
	}
	evs := history(t, url, clusterID)
	if len(evs) != 5 {
		t.Errorf("history after restart has %d events, want 5", len(evs))
	}
	// The command function runs again after the restart.
	out = ok(t, url, "failed", "--error", "node drain timed out", clusterID)
	mustContain(t, "failed after restart", out, "applied UpdateFailed", "node drain timed out")
	up.stop()
}

// TestRawNATSPublish publishes a command with nats.go alone, as an integrator would, and sees
// its effect with maintctl.
func TestRawNATSPublish(t *testing.T) {
	up := startUp(t, testenv.FreePort(t), filepath.Join(t.TempDir(), "data"))
	const (
		id = "/Subscriptions/raw/resourceGroups/rg-2/providers/Microsoft.RedHatOpenShift/openShiftClusters/raw-1"
		// The key, worked out by hand from the messaging contract (README): lower-cased, leading "/" dropped, "." as =2e.
		key = "subscriptions/raw/resourcegroups/rg-2/providers/microsoft=2eredhatopenshift/openshiftclusters/raw-1"
	)
	if got := strings.TrimSpace(ok(t, "", "key", id)); got != key {
		t.Fatalf("maintctl key = %q, want %q", got, key)
	}

	nc, err := nats.Connect(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	publish := func(msgID, body string) {
		t.Helper()
		msg := nats.NewMsg("maint.cmd." + key)
		msg.Data = []byte(body)
		msg.Header.Set("Nats-Msg-Id", msgID)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if ack.Stream != "MAINT_COMMANDS" {
			t.Errorf("stored in %s, want MAINT_COMMANDS", ack.Stream)
		}
	}
	publish("raw-cmd-1", `{"id": "raw-cmd-1", "resourceId": "`+id+`", "task": "Pending", "reason": "from nats.go", "actor": "integrator", "window": {"start": "2030-01-01T00:00:00Z", "end": "2030-01-01T04:00:00Z"}}`)
	publish("raw-cmd-2", `this is not JSON`)

	var rec record
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec = getRecord(t, up.URL, id)
		if rec.State == "Pending" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rec.State != "Pending" || rec.Reason != "from nats.go" || rec.ResourceID != id || rec.Key != key {
		t.Fatalf("record after a raw publish: %+v", rec)
	}
	// The emitter shows the state on the Prometheus page `up` serves (no OTLP endpoint set).
	waitForMetric(t, up, `cloud_resource_id="`+id+`"`, `cluster_maintenance_state="pending"`)

	// The record keeps the first casing; any casing of the ID finds it.
	if lower := getRecord(t, up.URL, strings.ToLower(id)); lower.ResourceID != id {
		t.Errorf("get by lower-case ID: %+v", lower)
	}

	// Both commands have an outcome: applied, and rejected as unreadable.
	deadline = time.Now().Add(15 * time.Second)
	var evs []event
	for {
		evs = history(t, up.URL, id)
		if len(evs) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(evs) != 2 {
		t.Fatalf("history = %+v, want 2 events", evs)
	}
	if evs[0].CommandID != "raw-cmd-1" || evs[0].Outcome != "applied" || evs[0].Actor != "integrator" {
		t.Errorf("first event = %+v", evs[0])
	}
	if evs[1].CommandID != "raw-cmd-2" || evs[1].Outcome != "rejected" || evs[1].Code != "InvalidRequestContent" {
		t.Errorf("second event = %+v", evs[1])
	}
	up.stop()
}

var metricsRE = regexp.MustCompile(`metrics: (http://127\.0\.0\.1:\d+/\S*)`)

// waitForMetric scrapes the metrics page `up` printed until a sample line holds every label
// and the value 1.
func waitForMetric(t *testing.T, up *upProc, labels ...string) {
	t.Helper()
	m := metricsRE.FindStringSubmatch(up.out.String())
	if m == nil {
		t.Fatalf("up did not print a metrics URL:\n%s", up.out)
	}
	deadline := time.Now().Add(15 * time.Second)
	var page string
	for time.Now().Before(deadline) {
		resp, err := http.Get(m[1])
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page = string(b)
			for _, line := range strings.Split(page, "\n") {
				if !strings.HasSuffix(line, "} 1") {
					continue
				}
				all := true
				for _, l := range labels {
					all = all && strings.Contains(line, l)
				}
				if all {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no sample with %v = 1 at %s within 15s; page:\n%s", labels, m[1], page)
}
