package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

const examplePolicyScope = "/subscriptions/0b1f/resourceGroups/rg-1"

func (a *app) policyCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "policy",
		Short: "Customers' maintenance policies: set, get, list, delete, check a window",
		Long: `A customer's maintenance policy says when maintenance may happen on the entities of a scope
(a subscription, a resource group or one resource): allowed windows as recurrence rules in a
time zone, blackout dates, a minimum notice, and whether the customer may move an announced
window. The most specific scope that covers an entity applies, alone. The command function
refuses announcements and updates the policy in force does not allow, unless forced.

Policies are set and deleted by policy commands, which the policies function applies
(` + "`maintctl function policies`, or `maintctl up`" + `); an admin may set any, a customer signer
those within its scopes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(a.policySetCommand(), a.policyGetCommand(), a.policyListCommand(), a.policyDeleteCommand(), a.policyCheckCommand())
	return c
}

// sendFlags are the flags of the policy and subscription commands that send one.
type sendFlags struct {
	actor, id string
	timeout   time.Duration
}

// addSendFlags adds the flags of a command that sends a kind ("policy", "subscription")
// command, whose actor is kept in its outcome event and in keptIn.
func (a *app) addSendFlags(c *cobra.Command, f *sendFlags, kind, keptIn string) {
	actor := cmp.Or(a.env("USER"), "maintctl")
	c.Flags().StringVar(&f.actor, "actor", actor, "who sends the command, kept in the outcome event and "+keptIn+" ($USER; a signer's name replaces it)")
	c.Flags().StringVar(&f.id, "id", "", kind+" command id, also sent as Nats-Msg-Id (default: a fresh one)")
	c.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the outcome")
}

// sendAwaited sends a policy or subscription command by send, on a connection of its own,
// and waits for its outcome until f.timeout ends.
func sendAwaited[R any](ctx context.Context, a *app, f sendFlags, send func(context.Context, *client.Client) (R, error)) (R, error) {
	var none R
	if f.timeout <= 0 {
		return none, fmt.Errorf("--timeout must be positive, got %s", f.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cl, err := a.connect(ctx, f.timeout)
	if err != nil {
		return none, err
	}
	defer cl.Close()
	return send(ctx, cl)
}

// noOutcome is the error of a command that has no outcome: err, or one saying so, with a
// hint to start the function that applies it (fn) when none came in time.
func noOutcome(err error, fn string) error {
	if err == nil {
		err = errors.New("no outcome")
	}
	if errors.Is(err, client.ErrNoOutcome) {
		return fmt.Errorf("%w. Is a %s function running? try `maintctl up` (or `maintctl function %s`)", err, fn, fn)
	}
	return err
}

// outcomeDetail is what the line of an outcome adds: why the command was rejected, a
// duplicate or dead-lettered.
func outcomeDetail(o domain.Outcome, code domain.Code, target, message string) string {
	switch o {
	case domain.OutcomeRejected:
		return ": " + rejectionText(domain.Event{Code: code, Target: target, Message: message})
	case domain.OutcomeDuplicate, domain.OutcomeDeadLettered:
		return ": " + message
	}
	return ""
}

// documentFlags build a policy from flags instead of a file.
type documentFlags struct {
	file, timeZone, minNotice string
	windows, blackouts        []string
	allowReschedule           bool
}

func (a *app) policySetCommand() *cobra.Command {
	var (
		f   sendFlags
		doc documentFlags
	)
	c := &cobra.Command{
		Use:   "set [flags] SCOPE",
		Short: "Set the policy of a scope (a policy command)",
		Long: `Set the maintenance policy of SCOPE (/subscriptions/<sub>, /subscriptions/<sub>/resourceGroups/<rg>
or a whole resource ID), replacing the one it has. Give the policy as a JSON document with
--file (- for standard input), or with flags:

  --time-zone Europe/Berlin                        windows and blackouts are local to it (default UTC)
  --window "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h"  an allowed window: RFC 5545 rule, local start, duration (repeat)
  --blackout "2026-12-20 2027-01-04 holiday freeze"     no maintenance from the first date to the second, exclusive (repeat)
  --min-notice 336h                                 the customer's minimum notice
  --allow-reschedule                                the customer may move an announced window

A policy is refused (InvalidParameter, naming the field) when a field is malformed, or when it
leaves less than 48 hours of allowed time, in stretches of at least 4 hours, in some 32-day
span of the next 365 days.`,
		Example: "  maintctl policy set " + examplePolicyScope + " --file policy.json\n" +
			"  maintctl policy set " + examplePolicyScope + " --time-zone Europe/Berlin --window \"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h\" --blackout \"2026-12-20 2027-01-04 holiday freeze\" --min-notice 336h --allow-reschedule",
		Args: oneScope,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := doc.document(cmd, args[0], a.readFile)
			if err != nil {
				return err
			}
			return a.sendPolicy(cmd.Context(), policy.Command{ID: f.id, Scope: args[0], Policy: &d, Actor: f.actor}, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&doc.file, "file", "", "the policy as a JSON document (- for standard input)")
	fl.StringVar(&doc.timeZone, "time-zone", "", "IANA time zone of the windows and blackouts (default UTC)")
	fl.StringArrayVar(&doc.windows, "window", nil, `an allowed window, "RRULE HH:MM DURATION" (repeat the flag for more)`)
	fl.StringArrayVar(&doc.blackouts, "blackout", nil, `a blackout, "YYYY-MM-DD YYYY-MM-DD [REASON]", end exclusive (repeat the flag for more)`)
	fl.StringVar(&doc.minNotice, "min-notice", "", "the customer's minimum notice (e.g. 336h)")
	fl.BoolVar(&doc.allowReschedule, "allow-reschedule", false, "the customer may move an announced window")
	a.addSendFlags(c, &f, "policy", "the revision")
	return c
}

// document is the policy of the flags, or of --file.
func (f documentFlags) document(cmd *cobra.Command, scope string, read func(string) ([]byte, error)) (policy.Document, error) {
	if f.file != "" {
		for _, name := range []string{"time-zone", "window", "blackout", "min-notice", "allow-reschedule"} {
			if cmd.Flags().Changed(name) {
				return policy.Document{}, fmt.Errorf("--file and --%s: give the policy one way", name)
			}
		}
		b, err := read(f.file)
		if err != nil {
			return policy.Document{}, fmt.Errorf("--file: %w", err)
		}
		d, rej := policy.Decode(b)
		if rej != nil {
			return policy.Document{}, fmt.Errorf("--file %s: %w", f.file, rej)
		}
		return d, nil
	}
	d := policy.Document{Scope: scope, TimeZone: f.timeZone, MinNotice: f.minNotice, AllowReschedule: f.allowReschedule}
	for _, w := range f.windows {
		parts := strings.Fields(w)
		if len(parts) != 3 {
			return d, fmt.Errorf(`--window %q: want "RRULE HH:MM DURATION", e.g. "FREQ=WEEKLY;BYDAY=SA 02:00 4h"`, w)
		}
		d.Windows = append(d.Windows, policy.Window{RRule: parts[0], Start: parts[1], Duration: parts[2]})
	}
	for _, b := range f.blackouts {
		parts := strings.SplitN(strings.TrimSpace(b), " ", 3)
		if len(parts) < 2 {
			return d, fmt.Errorf(`--blackout %q: want "YYYY-MM-DD YYYY-MM-DD [REASON]"`, b)
		}
		bo := policy.Blackout{Start: parts[0], End: parts[1]}
		if len(parts) == 3 {
			bo.Reason = strings.TrimSpace(parts[2])
		}
		d.Blackouts = append(d.Blackouts, bo)
	}
	return d, nil
}

// readFile reads a file, or standard input for "-".
func (a *app) readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

func (a *app) policyDeleteCommand() *cobra.Command {
	var f sendFlags
	c := &cobra.Command{
		Use:   "delete [flags] SCOPE",
		Short: "Delete the policy of a scope (a policy command with \"policy\": null)",
		Long: `Delete the maintenance policy of SCOPE: from then on the next wider scope's policy applies to
its entities, if any. Commands stored before the delete are still judged by the policy of
their stored time.`,
		Example: "  maintctl policy delete " + examplePolicyScope,
		Args:    oneScope,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendPolicy(cmd.Context(), policy.Command{ID: f.id, Scope: args[0], Actor: f.actor}, f)
		},
	}
	a.addSendFlags(c, &f, "policy", "the revision")
	return c
}

// oneScope is the argument check of the policy commands that take a scope.
func oneScope(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one SCOPE (/subscriptions/<sub>, /subscriptions/<sub>/resourceGroups/<rg> or a resource ID), got %d arguments (see `%s --help`)", cmd.Name(), len(args), cmd.CommandPath())
	}
	if _, rej := policy.ParseScope(args[0]); rej != nil {
		return fmt.Errorf("SCOPE %q: %s", args[0], rej.Message)
	}
	return nil
}

// policyResultJSON is the JSON document of policy set and delete.
type policyResultJSON struct {
	Command     policy.Command     `json:"command"`
	Seq         uint64             `json:"seq"`
	Republished bool               `json:"republished,omitempty"`
	Outcome     domain.PolicyEvent `json:"outcome"`
}

// sendPolicy sends a policy command, waits for its outcome and prints it.
func (a *app) sendPolicy(ctx context.Context, cmd policy.Command, f sendFlags) error {
	if cmd.ID == "" {
		cmd.ID = client.NewCommandID("maintctl-policy")
	}
	res, err := sendAwaited(ctx, a, f, func(ctx context.Context, cl *client.Client) (*client.PolicyResult, error) {
		return cl.SendPolicy(ctx, cmd)
	})
	if res == nil || res.Event.Outcome == "" {
		return noOutcome(err, "policies")
	}
	if a.json() {
		if perr := a.writeJSON(policyResultJSON{Command: res.Command, Seq: res.Seq, Republished: res.Republished, Outcome: res.Event}); perr != nil {
			return perr
		}
		return err
	}
	ev := res.Event
	line := fmt.Sprintf("%s %s of the policy of %s", ev.Outcome, ev.Action, ev.Scope)
	if ev.Outcome == domain.OutcomeApplied {
		line += fmt.Sprintf(" (revision %d)", ev.Revision)
	}
	line += outcomeDetail(ev.Outcome, ev.Code, ev.Target, ev.Message)
	if _, perr := fmt.Fprintf(a.stdout, "%s\npolicy command %s, %s sequence %d\n", line, ev.CommandID, domain.PoliciesStream, res.Seq); perr != nil {
		return perr
	}
	return err
}

func (a *app) policyGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get [flags] SCOPE",
		Short:   "Show the policy of a scope",
		Long:    "Show the maintenance policy that SCOPE has now, with its revision and who set it, and its next\nallowed windows. A scope without one is an error (exit status 1).",
		Example: "  maintctl policy get " + examplePolicyScope + "\n  maintctl policy get -o json " + examplePolicyScope,
		Args:    oneScope,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := a.session(cmd.Context(), readTimeout)
			if err != nil {
				return err
			}
			defer done()
			p, ok, err := cl.PolicyOf(ctx, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("scope %s has no policy", args[0])
			}
			if a.json() {
				return a.writeJSON(toPolicyJSON(p))
			}
			return a.printPolicy(p, time.Now())
		},
	}
}

// policyJSON is a stored policy for scripts.
type policyJSON struct {
	Scope    string          `json:"scope"`
	Key      string          `json:"key"`
	Level    string          `json:"level"`
	Revision uint64          `json:"revision"`
	SetAt    time.Time       `json:"setAt"`
	Actor    string          `json:"actor,omitempty"`
	Command  string          `json:"commandId,omitempty"`
	Policy   policy.Document `json:"policy"`
}

func toPolicyJSON(p client.Policy) policyJSON {
	r, d := p.Revision, p.Policy.Document()
	return policyJSON{Scope: d.Scope, Key: r.Key, Level: p.Policy.Scope().Level.String(), Revision: r.Seq, SetAt: r.At.UTC(),
		Actor: r.Meta.Actor, Command: r.Meta.LastCommandID, Policy: d}
}

// printPolicy prints one policy for people, with its next occurrences from now.
func (a *app) printPolicy(p client.Policy, now time.Time) error {
	d := p.Policy.Document()
	t := ui.NewTable(ui.Column{}, ui.Column{})
	row := func(k, v string) { t.Row(k, k, v) }
	row("scope", fmt.Sprintf("%s (%s)", d.Scope, p.Policy.Scope().Level))
	row("set", fmt.Sprintf("%s by %s, command %s (revision %d)", fmtTime(p.Revision.At), dash(p.Revision.Meta.Actor), dash(p.Revision.Meta.LastCommandID), p.Revision.Seq))
	row("time zone", p.Policy.Location().String())
	if len(d.Windows) == 0 {
		row("windows", "any time")
	}
	for i, w := range d.Windows {
		row(fmt.Sprintf("window %d", i), fmt.Sprintf("%s from %s for %s", w.RRule, w.Start, w.Duration))
	}
	for i, b := range d.Blackouts {
		row(fmt.Sprintf("blackout %d", i), strings.TrimSpace(fmt.Sprintf("%s to %s (end exclusive) %s", b.Start, b.End, b.Reason)))
	}
	row("min notice", dash(d.MinNotice))
	row("reschedule", map[bool]string{true: "allowed", false: "not allowed"}[d.AllowReschedule])
	for i, o := range p.Policy.Occurrences(now, now.Add(14*domain.Day)) {
		if i == 3 {
			break
		}
		row("next window", fmtTime(o.Start)+" → "+fmtTime(o.End))
	}
	return t.Write(a.stdout, ui.View{Format: ui.Table, NoHeaders: true})
}

func (a *app) policyListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the policy of every scope that has one",
		Example: "  maintctl policy list\n  maintctl policy list -o json | jq -r '.[].scope'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := a.session(cmd.Context(), readTimeout)
			if err != nil {
				return err
			}
			defer done()
			ps, err := cl.Policies(ctx)
			if err != nil {
				return err
			}
			if a.json() {
				out := make([]policyJSON, 0, len(ps))
				for _, p := range ps {
					out = append(out, toPolicyJSON(p))
				}
				return a.writeJSON(out)
			}
			t := ui.NewTable(ui.Column{Header: "SCOPE"}, ui.Column{Header: "LEVEL"}, ui.Column{Header: "ZONE"}, ui.Column{Header: "WINDOWS"},
				ui.Column{Header: "BLACKOUTS"}, ui.Column{Header: "MIN-NOTICE"}, ui.Column{Header: "RESCHEDULE"}, ui.Column{Header: "REVISION"})
			for _, p := range ps {
				d := p.Policy.Document()
				t.Row(d.Scope, d.Scope, p.Policy.Scope().Level.String(), p.Policy.Location().String(), strconv.Itoa(len(d.Windows)), strconv.Itoa(len(d.Blackouts)),
					d.MinNotice, strconv.FormatBool(d.AllowReschedule), strconv.FormatUint(p.Revision.Seq, 10))
			}
			return a.printWhole(t)
		},
	}
}
