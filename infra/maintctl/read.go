package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

const readTimeout = 30 * time.Second

// recordJSON is the JSON form of a record for scripts: the record's own fields (README, States and tasks) with
// the entity key, whether it exists and its bucket revision.
type recordJSON struct {
	ResourceID     string         `json:"resourceId"`
	Key            string         `json:"key"`
	Exists         bool           `json:"exists"`
	Revision       uint64         `json:"revision"`
	State          domain.State   `json:"state"`
	Updating       bool           `json:"updating"`
	Task           domain.Task    `json:"task"`
	LastError      string         `json:"lastError"`
	Window         *domain.Window `json:"window,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	StateSince     time.Time      `json:"stateSince,omitzero"`
	UpdatedAt      time.Time      `json:"updatedAt,omitzero"`
	LastCommandID  string         `json:"lastCommandId,omitempty"`
	LastCommandSeq uint64         `json:"lastCommandSeq,omitempty"`
	Version        int            `json:"version,omitempty"`
}

func toRecordJSON(e client.Entity) recordJSON {
	r := e.Record
	state := r.State
	if state == "" {
		state = domain.StateNone
	}
	return recordJSON{
		ResourceID: r.ResourceID, Key: e.Key, Exists: e.Exists(), Revision: e.Revision,
		State: state, Updating: r.Updating, Task: r.Task, LastError: r.LastError,
		Window: r.Window, Reason: r.Reason, StateSince: r.StateSince, UpdatedAt: r.UpdatedAt,
		LastCommandID: r.LastCommandID, LastCommandSeq: r.LastCommandSeq, Version: r.Version,
	}
}

// printRecord prints one record for people.
func (a *app) printRecord(e client.Entity) error {
	r := e.Record
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("resource", r.ResourceID)
	row("key", e.Key)
	if !e.Exists() {
		row("state", string(domain.StateNone)+" (never seen)")
		return tw.Flush()
	}
	state := string(r.State)
	if !r.StateSince.IsZero() {
		state += " (since " + fmtTime(r.StateSince) + ")"
	}
	row("state", state)
	upd := "no"
	if r.Updating {
		upd = "yes, task " + string(r.Task)
	}
	row("updating", upd)
	row("last error", dash(r.LastError))
	if r.Window != nil {
		row("window", fmtTime(r.Window.Start)+" → "+fmtTime(r.Window.End))
	}
	row("reason", dash(r.Reason))
	row("updated", fmt.Sprintf("%s by command %s (revision %d)", fmtTime(r.UpdatedAt), dash(r.LastCommandID), e.Revision))
	return tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get [flags] RESOURCE-ID",
		Short: "Show the current record of an entity",
		Long: `Show the current record of an entity from the bucket: state, whether an update is in
progress, the last error, the window and reason, and the command that changed it last. An
entity never seen is in state None.`,
		Example: "  maintctl get " + exampleID + "\n  maintctl get -o json " + exampleID + " | jq -r .state",
		Args:    oneResourceID,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := a.entitySession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done()
			e, err := cl.Get(ctx, args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.writeJSON(toRecordJSON(e))
			}
			return a.printRecord(e)
		},
	}
}

func (a *app) listCommand() *cobra.Command {
	var stateFlag string
	c := &cobra.Command{
		Use:   "list [--state STATE]",
		Short: "List every tracked entity and its state",
		Long: `List every entity that has a record, sorted by resource ID, read in one streaming pass over
the bucket. --state keeps the entities in one state; it accepts the state name in any casing
or its metric value (pending, customer_action_needed, ...).`,
		Example: "  maintctl list\n  maintctl list --state pending\n  maintctl list --state CustomerActionNeeded -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var want domain.State
			if stateFlag != "" {
				s, ok := domain.ParseStateLoose(stateFlag)
				if !ok {
					return fmt.Errorf("--state %q is not a state; use one of %s", stateFlag, stateNames())
				}
				want = s
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			listing, err := cl.List(ctx, want)
			if err != nil {
				return err
			}
			out, corrupt := listing.Entities, listing.Corrupt
			if a.json() {
				docs := make([]recordJSON, len(out))
				for i, e := range out {
					docs[i] = toRecordJSON(e)
				}
				return a.writeJSON(docs)
			}
			if len(out) == 0 {
				if want != "" {
					_, err = fmt.Fprintf(a.stdout, "no entity in state %s\n", want)
				} else {
					_, err = fmt.Fprintln(a.stdout, "no entity has a record yet")
				}
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RESOURCE ID\tSTATE\tUPDATING\tSINCE\tLAST ERROR")
			for _, e := range out {
				r := e.Record
				upd := "-"
				if r.Updating {
					upd = string(r.Task)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ResourceID, r.State, upd, fmtTime(r.StateSince), oneLine(dash(r.LastError), 60))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if corrupt > 0 {
				return fmt.Errorf("%d record(s) could not be decoded (see the warnings)", corrupt)
			}
			return nil
		},
	}
	c.Flags().StringVar(&stateFlag, "state", "", "only entities in this state ("+stateNames()+")")
	return c
}

func stateNames() string {
	names := make([]string, len(domain.States))
	for i, s := range domain.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// oneLine puts s on one line, cut to max runes (0: no limit).
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); max > 0 && len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func (a *app) historyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "history [flags] RESOURCE-ID",
		Short: "List every outcome event of an entity, oldest first",
		Long: `List the outcome event of every command sent for an entity, oldest first, from the
MAINT_EVENTS stream: time, actor, task, outcome, the state before and after, the rejection code
and message, the reason and whether it was forced.`,
		Example: "  maintctl history " + exampleID + "\n  maintctl history -o json " + exampleID,
		Args:    oneResourceID,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := a.entitySession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done()
			evs, err := cl.History(ctx, args[0])
			if err != nil {
				return err
			}
			if a.json() {
				if evs == nil {
					evs = []domain.Event{}
				}
				return a.writeJSON(evs)
			}
			if len(evs) == 0 {
				_, err := fmt.Fprintf(a.stdout, "no command was ever sent for %s\n", args[0])
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tACTOR\tTASK\tOUTCOME\tFROM → TO\tFORCE\tREASON\tCODE / MESSAGE")
			for _, ev := range evs {
				writeEventRow(tw, ev, false)
			}
			return tw.Flush()
		},
	}
}

// writeEventRow writes one tab-separated event row (with the resource ID first when withID).
func writeEventRow(w io.Writer, ev domain.Event, withID bool) {
	force := "-"
	if ev.Force {
		force = "forced"
	}
	detail := "-"
	switch {
	case ev.Code != "":
		detail = rejectionText(ev)
	case ev.Message != "":
		detail = ev.Message
	case ev.Error != "":
		detail = "update failed: " + ev.Error
	}
	id := ""
	if withID {
		id = ev.ResourceID + "\t"
	}
	fmt.Fprintf(w, "%s\t%s%s\t%s\t%s\t%s → %s\t%s\t%s\t%s\n", fmtTime(ev.At), id, dash(ev.Actor), dash(string(ev.Task)),
		ev.Outcome, dash(string(ev.From)), dash(string(ev.To)), force, oneLine(dash(ev.Reason), 60), oneLine(detail, 0))
}

func (a *app) noticesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "notices [flags] [RESOURCE-ID]",
		Short: "List lifecycle notices (reminders, due, overdue, stuck), oldest first",
		Long: `List the lifecycle notices kept in MAINT_NOTICES, oldest first: of every entity, or of the
one RESOURCE-ID. A notice says that an announced window starts within its lead time
(reminder), has started with the entity still Pending (due), or has ended with it still Pending
(overdue), or that an update has run longer than the stuck limit (stuck).`,
		Example: "  maintctl notices\n  maintctl notices " + exampleID + "\n  maintctl notices -o json | jq -r '.[] | .kind'",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
				if _, err := domain.Key(id); err != nil {
					return fmt.Errorf("RESOURCE-ID %q: %w", id, err)
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			ns, err := cl.Notices(ctx, id)
			if err != nil {
				return err
			}
			if a.json() {
				if ns == nil {
					ns = []domain.Notice{}
				}
				return a.writeJSON(ns)
			}
			if len(ns) == 0 {
				what := "any entity"
				if id != "" {
					what = id
				}
				_, err := fmt.Fprintf(a.stdout, "no notice was sent for %s\n", what)
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tRESOURCE ID\tKIND\tLEAD\tSTATE\tWINDOW\tSTATE SINCE")
			for _, n := range ns {
				writeNoticeRow(tw, n)
			}
			return tw.Flush()
		},
	}
}

// writeNoticeRow writes one tab-separated notice row.
func writeNoticeRow(w io.Writer, n domain.Notice) {
	win := "-"
	if n.Window != nil {
		win = fmtTime(n.Window.Start) + " → " + fmtTime(n.Window.End)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtTime(n.At), n.ResourceID, n.Kind, client.NoticeLead(n), n.State, win, fmtTime(n.StateSince))
}

func (a *app) watchCommand() *cobra.Command {
	var (
		since    time.Duration
		noFollow bool
	)
	c := &cobra.Command{
		Use:   "watch [flags] [RESOURCE-ID]",
		Short: "Follow outcome events and notices live (of every entity, or of one)",
		Long: `Print outcome events and lifecycle notices as they are stored, until interrupted
(Ctrl-C): of every entity, or of the one RESOURCE-ID. A notice's line starts with "notice".
With -o json, one JSON document per line; a notice is {"notice": {...}}. --since first
replays what was stored in that last period, events and notices merged in the order the
server stored them, then follows live from there without a gap or a repeat; --no-follow
prints that replay and exits.`,
		Example: "  maintctl watch\n  maintctl watch " + exampleID + "\n  maintctl watch --since 1h -o json | jq .outcome\n  maintctl watch --since 24h --no-follow > timeline.txt",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
				if _, err := domain.Key(id); err != nil {
					return fmt.Errorf("RESOURCE-ID %q: %w", id, err)
				}
			}
			if noFollow && since <= 0 {
				return errors.New("--no-follow prints the replay of --since and exits: give --since (e.g. --since 1h)")
			}
			ctx := cmd.Context()
			cctx, ccancel := context.WithTimeout(ctx, readTimeout)
			defer ccancel()
			cl, err := a.connect(cctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			o := client.TimelineOptions{ResourceID: id, NoFollow: noFollow}
			if since > 0 {
				o.Since = time.Now().Add(-since)
			}
			tl, err := cl.Timeline(cctx, o)
			if err != nil {
				return err
			}
			defer tl.Stop()
			what := "every entity"
			if id != "" {
				what = id
			}
			if !noFollow {
				a.log.Info("watching outcome events and notices; Ctrl-C stops", "of", what, "server", a.server)
			}
			for {
				it, err := tl.Next(ctx)
				switch {
				case errors.Is(err, io.EOF), err != nil && ctx.Err() != nil:
					return nil
				case err != nil:
					return err
				}
				if err := a.writeWatchItem(it); err != nil {
					return err
				}
			}
		},
	}
	c.Flags().DurationVar(&since, "since", 0, "first replay what was stored in this last period (e.g. 1h), in the order it was stored")
	c.Flags().BoolVar(&noFollow, "no-follow", false, "print the replay of --since and exit")
	return c
}

// writeWatchItem prints one line: columns separated by two spaces (no alignment across lines:
// the output is a stream).
func (a *app) writeWatchItem(it client.TimelineItem) error {
	if a.json() {
		if it.Notice != nil {
			return writeJSONLine(a.stdout, map[string]domain.Notice{"notice": it.Notice.Notice})
		}
		return writeJSONLine(a.stdout, it.Event.Event)
	}
	var b strings.Builder
	if it.Notice != nil {
		b.WriteString("notice\t")
		writeNoticeRow(&b, it.Notice.Notice)
	} else {
		writeEventRow(&b, it.Event.Event, true)
	}
	_, err := io.WriteString(a.stdout, strings.ReplaceAll(b.String(), "\t", "  "))
	return err
}

func (a *app) keyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "key RESOURCE-ID...",
		Short: "Print the entity key of resource IDs (offline)",
		Long: `Print the key of each RESOURCE-ID, one per line: lower-cased, the leading "/" dropped,
[a-z0-9_/-] kept and every other byte written as "=" and two hex digits. Commands go to
maint.cmd.<key>, outcome events to maint.evt.<key>, and the record is the bucket key <key>.
Needs no server.`,
		Example: "  maintctl key " + exampleID + "\n  nats kv get maintenance $(maintctl key " + exampleID + ")",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			keys := make([]string, 0, len(args))
			for _, id := range args {
				k, err := domain.Key(id)
				if err != nil {
					return fmt.Errorf("RESOURCE-ID %q: %w", id, err)
				}
				keys = append(keys, k)
			}
			if a.json() {
				if len(keys) == 1 {
					return a.writeJSON(map[string]string{"resourceId": args[0], "key": keys[0]})
				}
				docs := make([]map[string]string, len(keys))
				for i := range keys {
					docs[i] = map[string]string{"resourceId": args[i], "key": keys[i]}
				}
				return a.writeJSON(docs)
			}
			for _, k := range keys {
				if _, err := fmt.Fprintln(a.stdout, k); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
