package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// The cost of the customers' policies to the command function: the same load of commands that
// a policy judges (an announcement with a window, an update, its success, over and again per
// entity, every one applied), on entities a policy covers and on entities none covers, against
// the same server and the same replicas' code. Every command looks the policy of its stored
// time up in the replica's view of the policies bucket (the barrier included); with a policy,
// the decision also checks the window against a daily recurrence and a blackout.

// policyGroups is how many resource groups the entities are spread over: each has its policy.
const policyGroups = 8

// benchPolicy is a policy that allows every command of the cycle: windows every day (a
// recurrence to walk), a blackout far off (a span to check), a day's notice.
func benchPolicy(scope string, now time.Time) []byte {
	off := now.AddDate(0, 0, 200)
	return fmt.Appendf(nil, `{"scope": %q, "windows": [{"rrule": "FREQ=DAILY", "start": "00:00", "duration": "24h"}], "blackouts": [{"start": %q, "end": %q, "reason": "far off"}], "minNotice": "24h"}`,
		scope, off.Format(time.DateOnly), off.AddDate(0, 0, 1).Format(time.DateOnly))
}

// policyCycle makes the commands of a run under group prefix: per entity, Pending with a window
// three days ahead inside one day (02:00 to 06:00 UTC), an update, its success.
func policyCycle(prefix string, now time.Time) func(i, keys int, run string) domain.Command {
	day := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, 3)
	w := domain.Window{Start: day.Add(2 * time.Hour), End: day.Add(6 * time.Hour)}
	return func(i, keys int, run string) domain.Command {
		k := i % keys
		c := domain.Command{
			ID:         fmt.Sprintf("%s-%d", run, i),
			ResourceID: fmt.Sprintf("/subscriptions/bench/resourceGroups/%s-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s-%d", prefix, k%policyGroups, run, k),
		}
		switch (i / keys) % 3 {
		case 0:
			c.Task, c.Window = domain.TaskPending, &w
		case 1:
			c.Task = domain.TaskEverything
		default:
			c.Task = domain.TaskUpdateSucceeded
		}
		return c
	}
}

// setPolicies stores a policy on every resource group of prefix in the bucket, as the policies
// function writes them.
func setPolicies(ctx context.Context, js jetstream.JetStream, prefix string) error {
	for g := range policyGroups {
		scope := fmt.Sprintf("/subscriptions/bench/resourceGroups/%s-%d", prefix, g)
		m := nats.NewMsg(domain.PolicySubject(domain.MustKey(scope)))
		m.Data = benchPolicy(scope, time.Now())
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// policyCost is the throughput of the cycle with a policy in force and without, each the mean
// of two runs in the order without, with, with, without.
type policyCost struct{ with, without float64 }

func (c policyCost) ratio() float64 { return c.with / c.without }

func (c policyCost) String() string {
	return fmt.Sprintf("without a policy %.0f commands/s, with a policy in force %.0f commands/s (%.2f)", c.without, c.with, c.ratio())
}

func comparePolicy(ctx context.Context, srv *server, n, keys int) (policyCost, error) {
	var c policyCost
	if err := setPolicies(ctx, srv.js, "covered"); err != nil {
		return c, fmt.Errorf("policies: %w", err)
	}
	for _, with := range []bool{false, true, true, false} {
		prefix := map[bool]string{true: "covered", false: "free"}[with]
		tp, err := throughputWith(ctx, srv, sender{gen: policyCycle(prefix, time.Now())}, n, keys)
		if err != nil {
			return c, fmt.Errorf("with a policy %t: %w", with, err)
		}
		if with {
			c.with += tp / 2
		} else {
			c.without += tp / 2
		}
	}
	return c, nil
}

// benchPolicyOnly is the -policy-only run: the policy comparison alone.
func benchPolicyOnly(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv, err := startServer(ctx, topology{replicas: 1})
	if err != nil {
		return err
	}
	defer srv.stop()
	c, err := comparePolicy(ctx, srv, s.throughputN, s.keys)
	if err != nil {
		return err
	}
	printPolicy(out, s, c)
	return nil
}

func printPolicy(out io.Writer, s sizes, c policyCost) {
	fmt.Fprintf(out, "command function, 4 replicas, %d commands a policy judges over %d entities: %v\n", s.throughputN, s.keys, c)
	fmt.Fprintf(out, "ratio policy_command %.2f\n", c.ratio())
}
