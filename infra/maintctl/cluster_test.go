package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"maintsignals/infra/local"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

var natsURLRE = regexp.MustCompile(`(?m)^NATS_URL=(\S+)$`)

func TestUp_ThreeNodeClusterKeepsStateAcrossRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node JetStream cluster twice (about 20 s)")
	}
	data := filepath.Join(t.TempDir(), "data")
	c := newCLI(t, nil)
	args := []string{"up", "--nodes", "3", "--listen", "127.0.0.1:0", "--data", data, "--tick", "1s", "--metrics-listen", ""}

	startUp := func() (urls string, u *upRun) {
		u = startUpInProcess(t, c, 40*time.Second, args...)
		out := u.out.String()
		m := natsURLRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("up --nodes 3 did not print NATS_URL:\n%s", out)
		}
		urls = m[1]
		list := strings.Split(urls, ",")
		if len(list) != 3 {
			t.Fatalf("NATS_URL %q: want 3 URLs", urls)
		}
		for i, url := range list {
			mustContain(t, "up output", out, "maintctl-"+strconv.Itoa(i)+" listening on "+url, filepath.Join(data, "node-"+strconv.Itoa(i)))
		}
		mustContain(t, "up output", out, `cluster "maintctl" of 3 nodes`, "synced before each acknowledgement", "provisioned:", "functions: command, emitter")
		return urls, u
	}

	urls, u := startUp()
	if !regexp.MustCompile(`MAINT_COMMANDS\s+created`).MatchString(u.out.String()) {
		t.Errorf("first up did not create MAINT_COMMANDS:\n%s", u.out)
	}
	c.env["NATS_URL"] = urls
	c.ok("pending", "--reason", "replicated", testID)
	mustContain(t, "start", c.ok("start", testID), "applied Everything: Pending → Planned")

	// Every stream and the bucket have three replicas.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Connect(ctx, urls, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{domain.CommandsStream, domain.EventsStream, domain.DLQStream, domain.ScheduleStream, domain.Cell(0).RecordsStream()} {
		s, err := cl.JS.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replicas, want 3", name, r)
		}
	}
	cl.Close()

	if res := u.stop(); res.err != nil {
		t.Fatalf("up --nodes 3 after interrupt: %v\n%s", res.err, res.stderr)
	}
	mustContain(t, "up output", u.out.String(), "stopped")
	if _, err := os.Stat(filepath.Join(data, local.LayoutFile)); err != nil {
		t.Fatalf("no %s after the first run: %v", local.LayoutFile, err)
	}

	// The same --data comes back on the same addresses, with every record.
	again, u := startUp()
	if again != urls {
		t.Errorf("restart on the same --data: NATS_URL %s, want %s", again, urls)
	}
	if !regexp.MustCompile(`MAINT_COMMANDS\s+unchanged`).MatchString(u.out.String()) {
		t.Errorf("second up did not find MAINT_COMMANDS as it was:\n%s", u.out)
	}
	rec := decodeJSON[recordJSON](t, c.ok("get", "-o", "json", testID))
	if rec.State != domain.StatePlanned || !rec.Updating || rec.Reason != "replicated" {
		t.Errorf("after restart: %+v", rec)
	}
	c.ok("succeeded", testID)
	if evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID)); len(evs) != 3 {
		t.Errorf("history after restart has %d events, want 3", len(evs))
	}
	if res := u.stop(); res.err != nil {
		t.Fatalf("second up --nodes 3: %v\n%s", res.err, res.stderr)
	}
}

func TestUp_DataDirectoryKeepsItsNodeCount(t *testing.T) {
	c := newCLI(t, nil)
	single := t.TempDir()
	if err := os.MkdirAll(filepath.Join(single, "jetstream"), 0o750); err != nil {
		t.Fatal(err)
	}
	cluster := t.TempDir()
	if err := local.WriteLayout(cluster, local.Layout{Nodes: 3, Host: "127.0.0.1", ClientPorts: []int{1, 2, 3}, RoutePorts: []int{4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--nodes", "3", "--data", single}, "holds the store of a single server"},
		{[]string{"up", "--data", cluster}, "holds a 3-node cluster"},
		{[]string{"up", "--nodes", "5", "--data", cluster}, "run `maintctl up --nodes 3`"},
		{[]string{"up", "--nodes", "3", "--listen", ":4222", "--data", t.TempDir()}, "a cluster needs a host"},
		{[]string{"up", "--nodes", "5", "--listen", "127.0.0.1:65500", "--data", t.TempDir()}, "ports up to 65604"},
	} {
		r := c.run(append(tt.args, "--metrics-listen", "")...)
		if r.err == nil || !strings.Contains(r.err.Error(), tt.want) || r.code() != exitError {
			t.Errorf("maintctl %q: exit %d, err = %v, want one containing %q", tt.args, r.code(), r.err, tt.want)
		}
	}
}
