package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// onTerminal runs maintctl with its stdout on a pseudo-terminal of cols columns, as in a
// person's terminal, and returns what the terminal shows, its lines without the \r.
func (c *cli) onTerminal(cols uint16, args ...string) (string, error) {
	c.t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		c.t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: cols}); err != nil {
		c.t.Fatal(err)
	}
	read := make(chan []byte)
	go func() {
		var b bytes.Buffer
		_, err := io.Copy(&b, ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
			c.t.Errorf("reading the terminal: %v", err)
		}
		read <- b.Bytes()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errOut bytes.Buffer
	runErr := run(ctx, args, c.getenv, tty, &errOut)
	tty.Close() // the reader sees EIO once everything written was read
	out := strings.ReplaceAll(string(<-read), "\r\n", "\n")
	if runErr != nil {
		return out, errors.Join(runErr, errors.New(errOut.String()))
	}
	return out, nil
}

// longest is the width of the widest line of s, in runes.
func longest(s string) (int, string) {
	n, which := 0, ""
	for _, l := range strings.Split(s, "\n") {
		if w := len([]rune(l)); w > n {
			n, which = w, l
		}
	}
	return n, which
}

// Tables of real ARM IDs and long messages fit a terminal of 120 columns, the long cells cut
// with "…", while the same command into a pipe prints every value whole.
func TestTerminal_TablesFit120ColumnsAndPipesGetWholeValues(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	arm := func(i string) string {
		return "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-maintenance-west-europe-" + i +
			"/providers/Microsoft.RedHatOpenShift/openShiftClusters/cluster-" + i
	}
	const longError = "operator update timed out after 45 minutes: 3 of 5 worker nodes did not drain because pod disruption budgets blocked the eviction of their pods"
	for _, i := range []string{"001", "002"} {
		c.ok("pending", "--reason", "planned upgrade to the next minor version, announced to the customer two weeks ahead", "--window-start", "+14d", "--window-end", "+14d4h", arm(i))
		c.ok("start", "--task", "CertificatesRenewal", arm(i))
		c.ok("failed", "--error", longError, arm(i))
	}
	c.ok("customer-action", "--reason", "quota exceeded", arm("003"))
	// A dead letter and a notice, as the functions store them.
	ctx := context.Background()
	dl := nats.NewMsg(domain.DLQSubject(domain.MustKey(arm("001"))))
	dl.Data, _ = domain.Command{ID: "maintctl-20261201T101500Z-3f9a1c2b7d4e", ResourceID: arm("001"), Task: domain.TaskCertificatesRenewal}.Encode()
	dl.Header.Set(function.HeaderDLQReason, "gave up after 5 deliveries: read record: nats: timeout waiting for the bucket's stream leader to answer")
	if _, err := s.JS.PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	n := domain.Notice{NoticeID: "n-1", Kind: domain.NoticeReminder, ResourceID: arm("002"), State: domain.StatePending,
		Window: &domain.Window{Start: at.Add(14 * 24 * time.Hour), End: at.Add(14*24*time.Hour + 4*time.Hour)}, StateSince: at, Lead: 14 * 24 * 3600, At: at}
	nm := nats.NewMsg(domain.NoticeSubject(domain.MustKey(arm("002"))))
	nm.Data, _ = domain.EncodeNotice(n)
	if _, err := s.JS.PublishMsg(ctx, nm); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		long bool // wider than 120 columns whole
	}{{[]string{"list"}, true}, {[]string{"history"}, true}, {[]string{"history", arm("001")}, true}, {[]string{"notices"}, false}, {[]string{"dlq", "list"}, true}} {
		args := tc.args
		name := strings.Join(args, " ")
		shown, err := c.onTerminal(120, args...)
		if err != nil {
			t.Fatalf("%s on a terminal: %v", name, err)
		}
		if w, line := longest(shown); w > 120 {
			t.Errorf("%s: a line of %d columns on a terminal of 120:\n%s", name, w, line)
		}
		piped := c.ok(args...)
		if !tc.long {
			if piped != shown {
				t.Errorf("%s: a table that fits is changed on the terminal:\n%s\npiped:\n%s", name, shown, piped)
			}
			continue
		}
		if w, _ := longest(piped); w <= 120 {
			t.Errorf("%s: %d columns whole; nothing was long enough to test", name, w)
		}
		if !strings.Contains(shown, "…") || strings.Contains(piped, "…") {
			t.Errorf("%s: cut on the terminal %t, in the pipe %t; want only on the terminal\n%s", name, strings.Contains(shown, "…"), strings.Contains(piped, "…"), shown)
		}
		if strings.Count(shown, "\n") != strings.Count(piped, "\n") {
			t.Errorf("%s: %d lines on the terminal, %d in the pipe", name, strings.Count(shown, "\n"), strings.Count(piped, "\n"))
		}
	}
	list, _ := c.onTerminal(120, "list")
	mustContain(t, "list on a terminal", list, "NAME", "rg-maintenance-west-europe-001/cluster-001", "Planned", "operator update")
	mustContain(t, "list into a pipe", c.ok("list"), longError)
	wide, _ := c.onTerminal(120, "list", "-o", "wide")
	mustContain(t, "list -o wide on a terminal: whole", wide, arm("001"), longError, "announced to the customer two weeks ahead")
	if names, _ := c.onTerminal(80, "list", "-o", "name"); names != arm("001")+"\n"+arm("002")+"\n"+arm("003")+"\n" {
		t.Errorf("list -o name on a terminal:\n%s", names)
	}
	noHeaders, _ := c.onTerminal(120, "list", "--no-headers")
	if strings.Contains(noHeaders, "NAME") || strings.Count(noHeaders, "\n") != 3 {
		t.Errorf("list --no-headers:\n%s", noHeaders)
	}
	t.Logf("list on a terminal of 120 columns:\n%s", list)
	// A narrower terminal narrows the table further.
	if narrow, _ := c.onTerminal(90, "list"); func() bool { w, _ := longest(narrow); return w > 90 }() {
		t.Errorf("list on 90 columns:\n%s", narrow)
	}
}
