package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/client"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
)

func (a *app) dlqCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List dead-lettered commands and webhook deliveries and send them again",
		Long: `A command the command function could not handle goes to the ` + domain.DLQStream + ` stream with the
reason, and its outcome event says dead_lettered: its retries ran out (the bucket or NATS was
unavailable for longer than the backoff rides out) or the handler failed on it for good. A
rejected command is not a dead letter: it has its rejected outcome and is never retried.

List the dead letters, fix the cause, then replay them: each goes through the command function
again with its own command id, so a command that had in fact taken effect comes back as a
duplicate and changes nothing.

A webhook delivery that its endpoint refused (a 4xx other than 408 and 429), or that failed for
longer than the retries last, is a dead letter of its subscription (the WEBHOOK column). Its
replay sends the same event, with the same webhook-id, to that subscription's endpoint again.`,
		Example: "  maintctl dlq list\n  maintctl dlq replay 3 4\n  maintctl dlq replay --all",
		Args:    noArgs, // an unknown subcommand is an error, not this help
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(a.dlqListCommand(), a.dlqReplayCommand())
	return c
}

// letterJSON is the JSON form of a dead letter for scripts.
type letterJSON struct {
	Seq        uint64      `json:"seq"`
	At         time.Time   `json:"at"`
	Key        string      `json:"key"`
	ResourceID string      `json:"resourceId,omitempty"`
	Task       domain.Task `json:"task,omitempty"`
	CommandID  string      `json:"commandId,omitempty"`
	Deliveries int         `json:"deliveries"`
	Reason     string      `json:"reason"`
	// Subscription is set on a webhook delivery dead-lettered for that subscription; CommandID
	// is then the event's id (its webhook-id).
	Subscription string `json:"subscription,omitempty"`
	// Body is the command as it was stored, when it is JSON; BodyText otherwise.
	Body     json.RawMessage `json:"body,omitempty"`
	BodyText string          `json:"bodyText,omitempty"`
}

func toLetterJSON(l dlq.Letter) letterJSON {
	cmd := l.Command()
	doc := letterJSON{
		Seq: l.Seq, At: l.At, Key: l.Key, ResourceID: cmd.ResourceID, Task: cmd.Task,
		CommandID: l.CommandID, Deliveries: l.Deliveries, Reason: l.Reason, Subscription: l.Subscription,
	}
	if json.Valid(l.Body) {
		doc.Body = l.Body
	} else {
		doc.BodyText = string(l.Body)
	}
	return doc
}

// resourceOrKey names the entity of a dead letter: its resource ID, or its key when the body
// does not say.
func resourceOrKey(l dlq.Letter, cmd domain.Command) string {
	switch {
	case cmd.ResourceID != "":
		return cmd.ResourceID
	case l.Key != "":
		return "key " + l.Key
	default:
		return "-"
	}
}

// dlqListLimit is how many dead letters `dlq list` shows by default: the newest.
const dlqListLimit = 100

func (a *app) dlqListCommand() *cobra.Command {
	f := dlq.Filter{Limit: dlqListLimit}
	c := &cobra.Command{
		Use:   "list [flags]",
		Short: "List the dead-lettered commands and deliveries, oldest first",
		Long: `List the dead letters in ` + domain.DLQStream + `, oldest first: the dead letter's sequence (what
` + "`maintctl dlq replay`" + ` takes), when it was dead-lettered, the resource (or its key when the body
does not name it), the task, the webhook subscription of a delivery and why it failed; -o wide
adds the command id, the deliveries and the whole resource ID, -o json each body, -o name the
sequences alone. By default the newest ` + strconv.Itoa(dlqListLimit) + ` (--limit; 0 for all); --since and
--subscription narrow the list.`,
		Example: "  maintctl dlq list\n  maintctl dlq list --since 1d --subscription crm\n  maintctl dlq list -o json | jq -r '.[] | \"\\(.seq) \\(.reason)\"'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := a.session(cmd.Context(), readTimeout)
			if err != nil {
				return err
			}
			defer done()
			var (
				letters []dlq.Letter
				omitted int
			)
			err = cl.Guard(ctx, ">", func(ctx context.Context) error {
				var err error
				letters, omitted, err = listLetters(ctx, cl.JS, f)
				return err
			})
			if err != nil {
				return err
			}
			return a.printLetters(letters, omitted, f)
		},
	}
	dlqFilterFlags(c, &f)
	c.Flags().IntVar(&f.Limit, "limit", f.Limit, "only the newest N dead letters (0: all)")
	return c
}

// dlqFilterFlags are the flags that select dead letters.
func dlqFilterFlags(c *cobra.Command, f *dlq.Filter) {
	ui.TimeVar(c.Flags(), &f.Since, "since", "", ui.Ago, nil, "only the dead letters stored since this time: a duration ago (1d), a date or an RFC 3339 time")
	c.Flags().StringVar(&f.Subscription, "subscription", "", "only the webhook deliveries of this subscription")
}

func (a *app) printLetters(letters []dlq.Letter, omitted int, f dlq.Filter) error {
	if a.json() {
		return a.writeJSON(each(letters, toLetterJSON))
	}
	defer a.omitted(omitted, f.Limit, "dead letters")
	if len(letters) == 0 && a.format != ui.Name {
		_, err := fmt.Fprintf(a.stdout, "no dead letter in %s\n", domain.DLQStream)
		return err
	}
	ids := make([]string, len(letters))
	for i, l := range letters {
		ids[i] = resourceOrKey(l, l.Command())
	}
	names := ui.ShortNames(ids)
	t := ui.NewTable(ui.Column{Header: "SEQ"}, ui.Column{Header: "TIME"}, ui.Column{Header: "NAME", Shrink: true, Last: true},
		ui.Column{Header: "TASK"}, ui.Column{Header: "WEBHOOK"}, ui.Column{Header: "REASON", Shrink: true},
		ui.Column{Header: "COMMAND ID", Wide: true}, ui.Column{Header: "DELIVERIES", Wide: true}, ui.Column{Header: "RESOURCE", Wide: true})
	for i, l := range letters {
		deliveries := ""
		if l.Deliveries > 0 {
			deliveries = strconv.Itoa(l.Deliveries)
		}
		seq := strconv.FormatUint(l.Seq, 10)
		t.Row(seq, seq, fmtTime(l.At), names[i], string(l.Command().Task), l.Subscription, l.Reason, l.CommandID, deliveries, ids[i])
	}
	return a.printTable(t)
}

// replayJSON is the JSON form of one replayed dead letter.
type replayJSON struct {
	Seq        uint64      `json:"seq"` // its sequence in MAINT_DLQ, now removed
	Key        string      `json:"key"`
	ResourceID string      `json:"resourceId,omitempty"`
	Task       domain.Task `json:"task,omitempty"`
	CommandID  string      `json:"commandId,omitempty"`
	Stream     string      `json:"stream"`    // where it was published again
	StreamSeq  uint64      `json:"streamSeq"` // and its sequence there
	// Subscription: a webhook delivery, sent to this subscription's endpoint again.
	Subscription string `json:"subscription,omitempty"`
}

func (a *app) dlqReplayCommand() *cobra.Command {
	var (
		all bool
		f   dlq.Filter
	)
	c := &cobra.Command{
		Use:   "replay {SEQ... | --all | --subscription NAME | --since TIME}",
		Short: "Send dead-lettered commands through the command function again",
		Long: `Publish each dead letter SEQ (its sequence in ` + domain.DLQStream + `, as ` + "`maintctl dlq list`" + ` shows) to its
commands subject again and remove it from ` + domain.DLQStream + `; --all replays every dead letter, oldest
first; --subscription and --since replay the dead letters they select (of one webhook
subscription, stored since then), alone or with each other. Fix the cause first: a command that
fails again is dead-lettered again, under a new sequence.

The command keeps its id, so a command that had in fact taken effect comes back as a duplicate
and changes nothing. Replay does not wait for the outcomes: see each with
` + "`maintctl history RESOURCE-ID`" + ` (or follow them with ` + "`maintctl watch`" + `).

A SEQ that is not in ` + domain.DLQStream + ` (already replayed, expired, or mistyped) is reported and makes the
exit status 1; the other ones are replayed all the same.`,
		Example: "  maintctl dlq replay 3\n  maintctl dlq replay 3 4 7\n  maintctl dlq replay --subscription crm --since 2h\n  maintctl dlq replay --all -o json",
		Args: func(cmd *cobra.Command, args []string) error {
			selects := all || f.Subscription != "" || cmd.Flags().Changed("since")
			switch {
			case selects && len(args) > 0:
				return fmt.Errorf("give SEQ... or a selection (--all, --subscription, --since), not both (see `%s --help`)", cmd.CommandPath())
			case !selects && len(args) == 0:
				return errors.New("replay needs the SEQ of each dead letter (see `maintctl dlq list`), or --all, --subscription NAME or --since TIME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			seqs, err := parseSeqs(args)
			if err != nil {
				return err
			}
			ctx, cl, done, err := a.session(cmd.Context(), readTimeout)
			if err != nil {
				return err
			}
			defer done()
			// A denied publish or delete fails at once instead of waiting for the timeout.
			return cl.Guard(ctx, ">", func(ctx context.Context) error {
				return a.replay(ctx, cl.JS, seqs, f, len(seqs) == 0)
			})
		},
	}
	c.Flags().BoolVar(&all, "all", false, "replay every dead letter, oldest first")
	dlqFilterFlags(c, &f)
	return c
}

// parseSeqs reads the SEQ arguments of `dlq replay`.
func parseSeqs(args []string) ([]uint64, error) {
	seqs := make([]uint64, 0, len(args))
	for _, s := range args {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("SEQ %q: want the sequence number of a dead letter, as `maintctl dlq list` shows", s)
		}
		seqs = append(seqs, n)
	}
	return seqs, nil
}

// replay replays the dead letters seqs (with all, every one that f selects) and prints what it
// replayed.
func (a *app) replay(ctx context.Context, js jetstream.JetStream, seqs []uint64, f dlq.Filter, all bool) error {
	var (
		r      dlq.Replays
		failed error
	)
	if all {
		r, failed = dlq.ReplayWhere(ctx, js, f)
	} else {
		r, failed = dlq.ReplayEach(ctx, js, seqs, false)
	}
	if errors.Is(failed, jetstream.ErrStreamNotFound) {
		return notProvisioned(failed)
	}
	if all && len(r.Done) == 0 && len(r.Missing) == 0 && failed == nil {
		if a.json() {
			return a.writeJSON([]replayJSON{})
		}
		_, err := fmt.Fprintf(a.stdout, "no dead letter to replay in %s\n", domain.DLQStream)
		return err
	}
	done := []replayJSON{}
	for _, d := range r.Done {
		l, ack, c := d.Letter, d.Ack, d.Letter.Command()
		rj := replayJSON{Seq: l.Seq, Key: l.Key, ResourceID: c.ResourceID, Task: c.Task, CommandID: l.CommandID, Stream: ack.Stream, StreamSeq: ack.Sequence, Subscription: l.Subscription}
		done = append(done, rj)
		a.log.Debug("dead letter replayed", "seq", l.Seq, "command_id", rj.CommandID, "key", rj.Key, "stream_seq", rj.StreamSeq, "subscription", rj.Subscription)
		if !a.json() && l.Subscription != "" {
			fmt.Fprintf(a.stdout, "replayed dead letter %d: event %s for %s to webhook %s, now %s sequence %d\n",
				l.Seq, dash(rj.CommandID), resourceOrKey(l, c), l.Subscription, ack.Stream, ack.Sequence)
		} else if !a.json() {
			fmt.Fprintf(a.stdout, "replayed dead letter %d: command %s (%s) for %s, now %s sequence %d\n",
				l.Seq, dash(rj.CommandID), dash(string(rj.Task)), resourceOrKey(l, c), ack.Stream, ack.Sequence)
		}
	}
	if a.json() {
		if err := a.writeJSON(done); err != nil {
			return err
		}
	} else if len(done) > 0 {
		fmt.Fprintln(a.stdout, "see each outcome with `maintctl history RESOURCE-ID`")
	}
	var errs []error
	if len(r.Missing) > 0 {
		missing := make([]string, len(r.Missing))
		for i, seq := range r.Missing {
			missing[i] = strconv.FormatUint(seq, 10)
		}
		errs = append(errs, fmt.Errorf("%w: %s has no sequence %s (already replayed, or expired? see `maintctl dlq list`)",
			dlq.ErrNotFound, domain.DLQStream, strings.Join(missing, ", ")))
	}
	if failed != nil {
		errs = append(errs, failed)
	}
	return errors.Join(errs...)
}

// listLetters lists the dead letters f selects, with advice when the stream does not exist.
func listLetters(ctx context.Context, js jetstream.JetStream, f dlq.Filter) ([]dlq.Letter, int, error) {
	letters, omitted, err := dlq.ListWhere(ctx, js, f)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, 0, notProvisioned(err)
	}
	return letters, omitted, err
}

// notProvisioned says that the dead-letter stream is not there yet.
func notProvisioned(err error) error { return fmt.Errorf("%w: %w", client.ErrNotProvisioned, err) }
