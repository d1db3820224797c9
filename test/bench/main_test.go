package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the bench's child processes (the emitter's own memory).
func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	os.Exit(m.Run())
}

// TestRun_SmokeRunPrintsEveryFigure keeps the benchmark from rotting: a small run must finish and
// print the tracked lines. It asserts no figure.
func TestRun_SmokeRunPrintsEveryFigure(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), smoke, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"ratio command_throughput ", "ratio emitter_100k ", "ratio emitter_growth ", "mb emitter_1m_peak ", "ms command_p99 ", "ratio webhook_deliveries ", "deliveries/s",
		"ratio durable_command_r1 ", "ratio durable_command_r3 ", "ms durable_p99_r3 ", "mb emitter_1m_own ",
		"ratio signed_command ", "ratio signed_command_r1 ", "ratio signed_command_r3 ", "ratio policy_command ",
		"s emitter_1m ", "ratio emitter_1m_deadline ", "ratio emitter_shards_2 ", "ratio emitter_shards_4 ", "ratio emitter_points ", "s notices_1m ",
		"s restart_kill_1m ", "s restart_kill_bare_1m ", "ratio restart_kill_1m ", "s restart_clean_1m ", "s restart_clean_bare_1m ",
		"ratio campaign_announce ", "s campaign_100k ", "s campaign_dryrun_1m "} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

// TestPolicyOnly_SmokeRunPrintsItsFigure: the -policy-only part alone finishes (every command
// of both runs applied, in order) and prints its ratio.
func TestPolicyOnly_SmokeRunPrintsItsFigure(t *testing.T) {
	var out bytes.Buffer
	if err := benchPolicyOnly(context.Background(), smoke, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ratio policy_command ") || !strings.Contains(out.String(), "with a policy in force") {
		t.Errorf("output lacks the policy figures:\n%s", out.String())
	}
}

// TestSignedOnly_SmokeRunPrintsItsFigures: the -signed-only part alone finishes and prints its
// ratios.
func TestSignedOnly_SmokeRunPrintsItsFigures(t *testing.T) {
	var out bytes.Buffer
	if err := benchSignedOnly(context.Background(), smoke, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"unsynced R1, 4 replicas", "durable R3, 4 replicas", "ratio signed_command ", "ratio signed_command_r1 ", "ratio signed_command_r3 "} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}
