package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"maintsignals/test/testenv"
)

// `maintctl watch --since` replays events and notices merged in the order they were stored,
// then follows live without a gap or a repeat; with --no-follow it prints the replay and exits.
func TestWatchSince_ReplaysInStoredOrderThenFollows(t *testing.T) {
	env := testenv.StartListening(t)
	url := env.Server.URL()
	ids := testenv.ResourceIDs("watch", 8)
	history := testenv.PublishTimeline(t, env.JS, rand.New(rand.NewPCG(1, 2)), "old", 600, ids)

	// Entries are stored while the watch starts: each must come once, in the replay or live.
	liveDone := make(chan []string, 1)
	go func() {
		var live []string
		rng := rand.New(rand.NewPCG(3, 4))
		for k := range 30 { // over about half a second, across the watch's start
			live = append(live, testenv.PublishTimeline(t, env.JS, rng, fmt.Sprintf("new%d", k), 10, ids)...)
			time.Sleep(20 * time.Millisecond)
		}
		liveDone <- live
	}()
	lines := startWatch(t, url, "--since", "1h", "-o", "json")
	want := append(slices.Clone(history), <-liveDone...)
	got := readIDs(t, lines, len(want))
	if !slices.Equal(got[:len(history)], history) {
		t.Fatalf("the replay is not in stored order: %d of its %d lines out of place", outOfPlace(got[:len(history)], history), len(history))
	}
	sorted, wantSorted := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(sorted, wantSorted) {
		t.Fatalf("lines repeated or missing at the seam of the replay and the live part")
	}

	out := ok(t, url, "watch", "--since", "1h", "--no-follow", "-o", "json")
	var replay []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		replay = append(replay, lineID(t, l))
	}
	if !slices.Equal(replay, want) {
		t.Fatalf("watch --no-follow: %d lines, %d out of place; want the %d entries in stored order", len(replay), outOfPlace(replay, want), len(want))
	}
	// Without --since, the replay of the last hour.
	if out := ok(t, url, "watch", "--no-follow", "-o", "json"); strings.Count(out, "\n") != len(want) {
		t.Errorf("watch --no-follow without --since: %d lines, want the last hour's %d", strings.Count(out, "\n"), len(want))
	}
	if r := maintctl(t, url, "watch", "--no-follow", "--since", "0"); r.code == 0 || !strings.Contains(r.stderr, "--since") {
		t.Errorf("watch --no-follow --since 0: exit %d, %s", r.code, r.stderr)
	}
}

// startWatch runs `maintctl watch args` and hands over its stdout's lines as they come.
func startWatch(t *testing.T, url string, args ...string) <-chan string {
	t.Helper()
	watch := exec.Command(bin, append([]string{"watch"}, args...)...)
	watch.Env = append(baseEnv(), "NATS_URL="+url)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines, done := make(chan string), make(chan struct{})
	t.Cleanup(func() { close(done); _ = watch.Process.Kill(); _ = watch.Wait() })
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	return lines
}

// readIDs reads the ids of the next n lines of a watch -o json.
func readIDs(t *testing.T, lines <-chan string, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(time.Minute)
	for len(got) < n {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended after %d lines", len(got))
			}
			got = append(got, lineID(t, l))
		case <-deadline:
			t.Fatalf("watch printed %d lines in a minute, want %d", len(got), n)
		}
	}
	return got
}

// lineID is the id of a watch -o json line: an event's commandId or a notice's noticeId.
func lineID(t *testing.T, line string) string {
	t.Helper()
	var doc struct {
		CommandID string `json:"commandId"`
		Notice    *struct {
			NoticeID string `json:"noticeId"`
		} `json:"notice"`
	}
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("watch line is not JSON: %v\n%s", err, line)
	}
	if doc.Notice != nil {
		return doc.Notice.NoticeID
	}
	return doc.CommandID
}

func outOfPlace(got, want []string) int {
	n := 0
	for i := range got {
		if i >= len(want) || got[i] != want[i] {
			n++
		}
	}
	return n
}
