package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

// verbFlags are the flags every command verb takes.
type verbFlags struct {
	force   bool
	actor   string
	id      string
	reason  string
	timeout time.Duration
	noWait  bool
}

func (a *app) addVerbFlags(cmd *cobra.Command, f *verbFlags) {
	actor := a.env("USER")
	if actor == "" {
		actor = "maintctl"
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.force, "force", false, "apply even while an update is in progress (for an updater that died); the outcome records the force")
	fl.StringVar(&f.actor, "actor", actor, "who sends the command, kept in the outcome event ($USER)")
	fl.StringVar(&f.id, "id", "", "command id, also sent as Nats-Msg-Id: sending the same id again changes nothing (default: a fresh maintctl-<time>-<random> id)")
	fl.StringVar(&f.reason, "reason", "", "why, kept in the outcome event (and in the record for pending)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the outcome")
	fl.BoolVar(&f.noWait, "no-wait", false, "store the command and return without waiting for its outcome")
}

// verbSpec describes one command verb.
type verbSpec struct {
	use, short, long, example string
	// build fills the task and its own fields into cmd; it runs after flag parsing.
	build func(cmd *domain.Command) error
	// flags adds the verb's own flags.
	flags func(cmd *cobra.Command)
}

const exampleID = "/subscriptions/0b1f/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

func (a *app) commandVerbs() []*cobra.Command {
	var (
		windowStart, windowEnd string
		task                   string
		errText                string
	)
	specs := []verbSpec{
		{
			use:   "pending",
			short: "Announce maintenance: state Pending (task Pending)",
			long: `Announce maintenance of an entity: its state becomes Pending, with an optional window and
reason. A new announcement replaces the previous window and reason. Refused while an update
is in progress (unless --force).

--window-start and --window-end take RFC 3339 times (2026-04-01T02:00:00Z), a date alone
(2026-04-01: midnight UTC) or an offset from now (+2h, +14d); give both or neither.`,
			example: "  maintctl pending --reason \"planned upgrade\" --window-start 2026-04-01T02:00:00Z --window-end 2026-04-01T06:00:00Z " + exampleID + "\n  maintctl pending " + exampleID + " --window-start +14d --window-end +14d4h",
			flags: func(c *cobra.Command) {
				c.Flags().StringVar(&windowStart, "window-start", "", "start of the maintenance window (RFC 3339, a date, or +DURATION from now: +14d)")
				c.Flags().StringVar(&windowEnd, "window-end", "", "end of the maintenance window (RFC 3339, a date, or +DURATION from now)")
			},
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskPending
				w, err := parseWindow(windowStart, windowEnd, time.Now())
				cmd.Window = w
				return err
			},
		},
		{
			use:   "reschedule",
			short: "Move an announced window (task Reschedule), as a customer may",
			long: `Move the announced window of an entity that is Pending: the state stays Pending with its
stateSince, the window is replaced and a new series of notices starts. Allowed only when the
customer's policy in force allows rescheduling (allowReschedule), the new start is at least
1 hour away and the announced one more than 5 minutes away, and the new window fits the
policy's windows and blackouts (the notice in force does not apply: the customer chose).
Without --window-end the window keeps its length. A customer signer (--sign-key) may send it
for the entities of its scopes; an admin for any. --force changes nothing here.`,
			example: "  maintctl reschedule --window-start 2026-11-23T21:00:00Z " + exampleID + "\n  maintctl reschedule " + exampleID + " --window-start +72h --window-end +76h",
			flags: func(c *cobra.Command) {
				c.Flags().StringVar(&windowStart, "window-start", "", "the new start of the window (RFC 3339, or +DURATION from now; required)")
				c.Flags().StringVar(&windowEnd, "window-end", "", "the new end (default: the start plus the announced window's length)")
			},
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskReschedule
				w, err := parseReschedule(windowStart, windowEnd, time.Now())
				cmd.Window = w
				return err
			},
		},
		{
			use:   "start",
			short: "Start an update (an update task): state Planned or Unplanned, updating",
			long: `Start maintenance work on an entity: updating becomes true and lastError is cleared. The
state becomes Planned when the work was announced (Pending or Planned) and Unplanned
otherwise. Whatever performs the update then reports ` + "`succeeded` or `failed`" + `.

Update tasks: ` + taskNames(domain.UpdateTasks) + `.`,
			example: "  maintctl start " + exampleID + "\n  maintctl start --task CertificatesRenewal " + exampleID,
			flags: func(c *cobra.Command) {
				c.Flags().StringVar(&task, "task", string(domain.TaskEverything), "the update task: "+taskNames(domain.UpdateTasks))
				a.completeFlag(c, "task", completeWords(domain.UpdateTasks...))
			},
			build: func(cmd *domain.Command) error {
				t, ok := parseUpdateTask(task)
				if !ok {
					return fmt.Errorf("--task %q is not an update task; use one of %s", task, taskNames(domain.UpdateTasks))
				}
				cmd.Task = t
				return nil
			},
		},
		{
			use:   "succeeded",
			short: "Report that the update in progress succeeded (task UpdateSucceeded): state None",
			long: `Report that the update in progress succeeded: the state becomes None, updating false and
lastError empty. Refused with RequestNotAllowed when no update is in progress.`,
			example: "  maintctl succeeded " + exampleID,
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskUpdateSucceeded
				return nil
			},
		},
		{
			use:   "failed",
			short: "Report that the update in progress failed (task UpdateFailed)",
			long: `Report that the update in progress failed: updating becomes false and lastError is set to
--error; the state (Planned or Unplanned) stays until an SRE sends clear, customer-action or a
new update. Refused with RequestNotAllowed when no update is in progress.`,
			example: "  maintctl failed --error \"operator update timed out\" " + exampleID,
			flags: func(c *cobra.Command) {
				c.Flags().StringVar(&errText, "error", "", "what went wrong (required)")
			},
			build: func(cmd *domain.Command) error {
				if strings.TrimSpace(errText) == "" {
					return errors.New("failed needs --error TEXT: what went wrong")
				}
				cmd.Task, cmd.Error = domain.TaskUpdateFailed, errText
				return nil
			},
		},
		{
			use:   "clear",
			short: "Clear the maintenance signal (task None): state None",
			long: `Clear the maintenance signal of an entity: the state becomes None and the window is dropped.
Refused while an update is in progress (unless --force, for an updater that died).`,
			example: "  maintctl clear " + exampleID + "\n  maintctl clear --force --reason \"updater pod died\" " + exampleID,
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskNone
				return nil
			},
		},
		{
			use:   "customer-action",
			short: "Signal that the customer must act (task CustomerActionNeeded)",
			long: `Signal that the customer must act before maintenance can go on: the state becomes
CustomerActionNeeded. Refused while an update is in progress (unless --force).`,
			example: "  maintctl customer-action --reason \"quota exceeded\" " + exampleID,
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskCustomerActionNeeded
				return nil
			},
		},
		{
			use:   "forget",
			short: "Take an entity out of the signal (task Forget): no metrics, no notices",
			long: `Take an entity out of the signal: from the next tick it has no status points and no notices,
and ` + "`list`" + ` leaves it out. Its history stays (` + "`maintctl history`" + `), and a later command tracks it
again as if it were new. For an entity that no longer exists, or one a mistyped resource ID
created. Refused while an update is in progress (unless --force).`,
			example: "  maintctl forget --reason \"cluster deleted\" " + exampleID + "\n  maintctl forget c9",
			build: func(cmd *domain.Command) error {
				cmd.Task = domain.TaskForget
				return nil
			},
		},
	}
	out := make([]*cobra.Command, 0, len(specs))
	for _, s := range specs {
		var f verbFlags
		c := &cobra.Command{
			Use:               s.use + " [flags] RESOURCE-ID",
			Short:             s.short,
			Long:              s.long + "\n\nThe command waits for its own outcome event and prints it with the new record. A rejected\nor dead-lettered command prints the code, target and message and exits with status 2.",
			Example:           s.example,
			Args:              oneResourceID,
			ValidArgsFunction: a.completeIDs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := domain.Command{
					ResourceID: args[0],
					Actor:      f.actor,
					Force:      f.force,
					Reason:     f.reason,
					ID:         f.id,
				}
				if c.ID == "" {
					c.ID = client.NewCommandID("maintctl")
				}
				if err := s.build(&c); err != nil {
					return err
				}
				return a.send(cmd.Context(), c, f)
			},
		}
		if s.flags != nil {
			s.flags(c)
		}
		a.addVerbFlags(c, &f)
		out = append(out, c)
	}
	return out
}

// send sends a command, waits for its outcome and prints it.
func (a *app) send(ctx context.Context, c domain.Command, f verbFlags) error {
	if _, err := domain.Key(c.ResourceID); err != nil {
		return fmt.Errorf("RESOURCE-ID %q: %w", c.ResourceID, err)
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", f.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cl, err := a.connect(ctx, f.timeout)
	if err != nil {
		return err
	}
	defer cl.Close()

	if f.noWait {
		// Whether the entity is tracked, at best (a read that fails says nothing).
		before, berr := cl.Get(ctx, c.ResourceID)
		seq, dup, err := cl.PublishOnly(ctx, c)
		if err != nil {
			return a.sendError(err)
		}
		if a.json() {
			return a.writeJSON(map[string]any{"command": c, "seq": seq, "republished": dup})
		}
		note := ""
		if dup {
			note = " (the stream already held this id: nothing new stored)"
		}
		_, err = fmt.Fprintf(a.stdout, "stored command %s (%s) for %s as %s sequence %d%s\n", c.ID, c.Task, c.ResourceID, domain.CommandsStream, seq, note)
		if berr == nil && !before.Tracked() && c.Task != domain.TaskForget {
			fmt.Fprintf(a.stderr, "note: %s is not tracked: once this command is applied, it is exported to the health system (a mistyped ID? see `maintctl list`)\n", c.ResourceID)
		}
		return err
	}

	res, err := cl.Send(ctx, c)
	if res == nil || res.Event.Outcome == "" {
		if err == nil {
			err = errors.New("no outcome")
		}
		return a.sendError(err)
	}
	if perr := a.printResult(ctx, cl, res); perr != nil && err == nil {
		err = perr
	}
	if res.Tracks {
		fmt.Fprintf(a.stderr, "note: %s was not tracked before: it is now exported to the health system, from the next tick (if the ID is mistyped: `maintctl forget %s`)\n", c.ResourceID, shellQuote(c.ResourceID))
	}
	return err
}

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (a *app) sendError(err error) error {
	switch {
	case errors.Is(err, client.ErrNoOutcome):
		return fmt.Errorf("%w. Is a command function running? try `maintctl up` (or `maintctl function command`); if one is, it may still be retrying the command: `maintctl history` shows the outcome once it is in", err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: is NATS reachable at %s? is `maintctl up` running?", err, a.server)
	}
	return err
}

// resultJSON is the JSON document of a command verb.
type resultJSON struct {
	Command     domain.Command `json:"command"`
	Seq         uint64         `json:"seq"`
	Republished bool           `json:"republished,omitempty"`
	Outcome     domain.Event   `json:"outcome"`
	Record      recordJSON     `json:"record"`
}

func (a *app) printResult(ctx context.Context, cl *client.Client, res *client.Result) error {
	if a.json() {
		rec, err := a.judged(ctx, cl, res.Entity)
		if err != nil {
			return err
		}
		return a.writeJSON(resultJSON{
			Command: res.Command, Seq: res.Seq, Republished: res.Republished,
			Outcome: res.Event, Record: rec,
		})
	}
	ev := res.Event
	var line string
	switch ev.Outcome {
	case domain.OutcomeApplied:
		line = fmt.Sprintf("applied %s: %s → %s", ev.Task, ev.From, ev.To)
		if ev.Force {
			line += " (forced)"
		}
		if ev.Message != "" {
			line += "; " + ev.Message
		}
		if ev.Task == domain.TaskForget {
			line += "; out of the signal from the next tick, its history kept"
		}
	case domain.OutcomeDuplicate:
		line = fmt.Sprintf("duplicate %s: command id %s was applied before; nothing changed", ev.Task, ev.CommandID)
	case domain.OutcomeRejected:
		line = fmt.Sprintf("rejected %s: %s", ev.Task, rejectionText(ev))
	case domain.OutcomeDeadLettered:
		line = fmt.Sprintf("dead-lettered %s: %s (the command is kept in %s)", ev.Task, ev.Message, domain.DLQStream)
	default:
		line = fmt.Sprintf("%s %s: %s → %s", ev.Outcome, ev.Task, ev.From, ev.To)
	}
	if res.Republished && ev.Outcome != domain.OutcomeDuplicate {
		line += " (id sent before: this is its earlier outcome)"
	}
	if _, err := fmt.Fprintf(a.stdout, "%s\ncommand %s, %s sequence %d\n\n", line, ev.CommandID, domain.CommandsStream, res.Seq); err != nil {
		return err
	}
	return a.printRecord(res.Entity, "")
}

func rejectionText(ev domain.Event) string {
	s := string(ev.Code)
	if ev.Target != "" {
		s += " (" + ev.Target + ")"
	}
	if ev.Message != "" {
		s += ": " + ev.Message
	}
	return s
}

// parseWindow reads --window-start/--window-end; both or neither.
func parseWindow(start, end string, now time.Time) (*domain.Window, error) {
	if start == "" && end == "" {
		return nil, nil
	}
	if start == "" || end == "" {
		return nil, errors.New("give both --window-start and --window-end, or neither")
	}
	s, err := parseTime(start, now)
	if err != nil {
		return nil, fmt.Errorf("--window-start: %w", err)
	}
	e, err := parseTime(end, now)
	if err != nil {
		return nil, fmt.Errorf("--window-end: %w", err)
	}
	if !e.After(s) {
		return nil, fmt.Errorf("--window-end %s must be after --window-start %s", e.Format(time.RFC3339), s.Format(time.RFC3339))
	}
	return &domain.Window{Start: s, End: e}, nil
}

// parseReschedule reads a Reschedule's --window-start (required) and --window-end (optional).
func parseReschedule(start, end string, now time.Time) (*domain.Window, error) {
	if start == "" {
		return nil, errors.New("reschedule needs --window-start: the new start of the window")
	}
	if end != "" {
		return parseWindow(start, end, now)
	}
	s, err := parseTime(start, now)
	if err != nil {
		return nil, fmt.Errorf("--window-start: %w", err)
	}
	return &domain.Window{Start: s}, nil
}

// parseTime reads a time as people write one (domain.ParseTime): RFC 3339, a date alone
// (midnight UTC), or an offset from now (+2h, +14d).
func parseTime(s string, now time.Time) (time.Time, error) { return domain.ParseTime(s, now) }

// parseUpdateTask accepts an update task in any casing and returns its exact name.
func parseUpdateTask(s string) (domain.Task, bool) {
	for _, t := range domain.UpdateTasks {
		if strings.EqualFold(s, string(t)) {
			return t, true
		}
	}
	return "", false
}

func taskNames(ts []domain.Task) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
