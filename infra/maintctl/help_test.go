package main

import (
	"strings"
	"testing"
	"time"
)

func TestHelp_FitsAScreenAndShowsGlobalFlagsOnce(t *testing.T) {
	c := newCLI(t, nil)
	root := c.ok("--help")
	if n := strings.Count(root, "\n"); n > 43 {
		t.Errorf("root help is %d lines, want a screen (at most 43):\n%s", n, root)
	}
	mustContain(t, "root help", root, "Announce and run maintenance", "Read the state", "Run the stack and its dead letters:", "dlq",
		"forget", "completion", "options", "Exit status", `"maintctl options"`)
	if strings.Contains(root, "--server") || strings.Contains(c.ok("help", "pending"), "--tlsca") {
		t.Errorf("global flags repeated in the help:\n%s", root)
	}
	if c.ok("help") != root || c.ok() != root {
		t.Error("`maintctl help` and `maintctl` do not print the root help")
	}
	mustContain(t, "pending help", c.ok("pending", "--help"), "--window-start", "--force", "ID=/subscriptions/", "$ID", `"maintctl options"`)
	mustContain(t, "dlq list help", c.ok("help", "dlq", "list"), "--subscription", "--since", "--limit")
	opts := c.ok("options")
	mustContain(t, "options", opts, "--server", "--context NAME", "--nkey", "--tlsca", "--inbox-prefix", "--sign-key", "-o, --output", "--no-headers", "NATS_CONTEXT")
	for name, out := range map[string]string{"root": root, "options": opts, "list": c.ok("list", "--help"), "up": c.ok("up", "--help")} {
		for _, l := range strings.Split(out, "\n") {
			if len([]rune(l)) > 120 {
				t.Errorf("%s help has a line of %d columns: %q", name, len([]rune(l)), l)
			}
		}
	}

	for _, args := range [][]string{{"help", "nonexist"}, {"help", "dlq", "lst"}} {
		r := c.run(args...)
		if r.code() != exitError || !strings.Contains(r.err.Error(), "unknown help topic") {
			t.Errorf("maintctl %v: exit %d, %v", args, r.code(), r.err)
		}
	}
	if r := c.run("help", "pendng"); r.err == nil || !strings.Contains(r.err.Error(), "did you mean pending?") {
		t.Errorf("help pendng: %v", r.err)
	}
	if out := c.ok("--version"); !strings.HasPrefix(out, "maintctl ") || out != c.ok("version") {
		t.Errorf("--version %q, version %q", out, c.ok("version"))
	}
}

func TestCompletion_ScriptsVerbsFlagsAndValues(t *testing.T) {
	c := newCLI(t, nil)
	for shell, want := range map[string]string{"bash": "__start_maintctl", "zsh": "#compdef maintctl", "fish": "complete -c maintctl"} {
		mustContain(t, "completion "+shell, c.ok("completion", shell), want)
	}
	complete := func(args ...string) []string {
		t.Helper()
		out := c.ok(append([]string{"__complete"}, args...)...)
		var words []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				w, _, _ := strings.Cut(l, "\t")
				words = append(words, w)
			}
		}
		return words
	}
	has := func(what string, got []string, want ...string) {
		t.Helper()
		joined := " " + strings.Join(got, " ") + " "
		for _, w := range want {
			if !strings.Contains(joined, " "+w+" ") {
				t.Errorf("%s completes %v, without %q", what, got, w)
			}
		}
	}
	has("verbs", complete("f"), "failed", "forget", "function")
	has("flags", complete("list", "--"), "--state", "--prefix", "--updating", "--window-before", "--server", "--context")
	has("--state", complete("list", "--state", ""), "None", "Pending", "CustomerActionNeeded")
	has("--task", complete("start", "--task", ""), "Everything", "OperatorUpdate", "MigrateLoadBalancer")
	has("-o", complete("get", "-o", ""), "table", "wide", "name", "json")
	has("--kind", complete("notices", "--kind", ""), "reminder", "stuck")
	has("function", complete("function", ""), "command", "emitter", "notices", "webhook")
	has("help", complete("help", "dl"), "dlq")

	// Resource IDs come from the bucket; with no server, nothing, quickly.
	c.env["NATS_URL"] = "nats://127.0.0.1:1"
	start := time.Now()
	if got := complete("get", "/"); len(got) != 0 {
		t.Errorf("IDs without a server: %v", got)
	}
	if d := time.Since(start); d > 2*completeTimeout {
		t.Errorf("completion without a server took %s", d)
	}
	s := startStack(t, stackOpts{})
	c = newCLI(t, s)
	for _, id := range []string{testID, "/subscriptions/0b1f/resourceGroups/rg-2/providers/p/t/c2", "c9"} {
		c.ok("pending", id)
	}
	c.ok("forget", "c9")
	if got := complete("get", "/subscriptions/0B1F/resourceGroups/rg-"); strings.Join(got, " ") != testID+" /subscriptions/0b1f/resourceGroups/rg-2/providers/p/t/c2" {
		t.Errorf("IDs from the bucket: %v", got)
	}
	if got := complete("forget", testID, ""); len(got) != 0 {
		t.Errorf("a second ID completed: %v", got)
	}
	if got := complete("list", "--prefix", "c"); len(got) != 0 {
		t.Errorf("a forgotten ID completed: %v", got)
	}
}
