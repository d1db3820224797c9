package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

const readTimeout = 30 * time.Second

// recordJSON is the JSON form of a record, the one shape every reader writes (fleet.Record:
// the web view's JSON is the same).
type recordJSON = fleet.Record

// judged is the JSON form of an entity's record, with its facts at now: overdue, stuck after
// --stuck-after, the policy in force for it (read from the bucket, the scopes that could cover
// it only: a customer's role may read no other) and whether its window conflicts with it.
func (a *app) judged(ctx context.Context, cl *client.Client, e client.Entity) (recordJSON, error) {
	var in fleet.InForce
	if e.Exists() { // the policy in force is a fact of every record shown (fleet.Record.Policy)
		p, ok, err := cl.PolicyFor(ctx, e.Record.ResourceID)
		switch {
		case errors.Is(err, client.ErrNotProvisioned):
		case err != nil && ctx.Err() != nil:
			return recordJSON{}, fmt.Errorf("the policy in force for %s: %w", e.Record.ResourceID, err)
		case err != nil:
			// A policy that does not compile allows nothing to conflict with, as in the emitter.
			a.log.Warn("the policy in force does not read; conflict shown false", "resource_id", e.Record.ResourceID, "error", err)
		case ok:
			in = fleet.InForce{Policy: p.Policy, Since: p.Revision.At}
		}
	}
	return fleet.View(e.Key, e.Revision, e.Record, time.Now(), a.stuckLimit(), in), nil
}

// stuckLimit is --stuck-after, where the command has it, else the default the functions use.
func (a *app) stuckLimit() time.Duration { return cmp.Or(a.stuckAfter, domain.DefaultStuckAfter) }

// stuckAfterFlag adds --stuck-after, the limit of "stuck" in the JSON of records.
func (a *app) stuckAfterFlag(c *cobra.Command) {
	c.Flags().DurationVar(&a.stuckAfter, "stuck-after", domain.DefaultStuckAfter, "an update running longer than this is stuck (the JSON's stuck; as the functions' --stuck-after)")
}

// printRecord prints one record for people.
// campaignPhase is the "campaign" row of an entity a campaign holds: the campaign, and the
// entity's phase in it when it can be read (a customer reads its own entities' phases).
func (a *app) campaignPhase(ctx context.Context, cl *client.Client, e client.Entity) string {
	ref := e.Record.Campaign
	if ref == nil || !e.Exists() {
		return ""
	}
	row := fmt.Sprintf("%s, generation %d", ref.ID, ref.Generation)
	ph, ok, err := cl.CampaignPhase(ctx, e.Record.ResourceID, ref.ID)
	switch {
	case err != nil:
		a.log.Debug("the entity's campaign phase cannot be read", "campaign", ref.ID, "error", err)
	case ok:
		row += ": " + string(ph.Phase)
		if ph.Reason != "" {
			row += " (" + ph.Reason + ")"
		}
	}
	return row
}

// printRecord prints an entity's record; campaign, when set, is its campaign row.
func (a *app) printRecord(e client.Entity, campaign string) error {
	r := e.Record
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("resource", r.ResourceID)
	row("key", e.Key)
	if !e.Exists() {
		row("state", string(domain.StateNone)+" (never seen)")
		return tw.Flush()
	}
	if r.Forgotten() {
		row("state", "forgotten at "+fmtTime(r.ForgottenAt)+": out of the signal; a new command tracks it again")
		row("reason", dash(r.Reason))
		row("updated", fmt.Sprintf("%s by command %s (revision %d)", fmtTime(r.UpdatedAt), dash(r.LastCommandID), e.Revision))
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
	if campaign != "" {
		row("campaign", campaign)
	}
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

// regionTimeout bounds a read from a region through the hub: a region that does not answer
// within it is unreachable.
const regionTimeout = 5 * time.Second

func (a *app) getCommand() *cobra.Command {
	var region string
	c := &cobra.Command{
		Use:   "get [flags] RESOURCE-ID",
		Short: "Show the current record of an entity",
		Long: `Show the current record of an entity from the bucket: state, whether an update is in
progress, the last error, the window and reason, and the command that changed it last. An
entity never seen is in state None.`,
		Example:           "  maintctl get " + exampleID + "\n  maintctl get -o json " + exampleID + " | jq -r .state",
		Args:              oneResourceID,
		ValidArgsFunction: a.completeIDs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := a.entitySession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done()
			if region != "" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, regionTimeout)
				defer cancel()
				if cl, err = cl.InRegion(region); err != nil {
					return fmt.Errorf("--region: %w", err)
				}
			}
			e, err := cl.Get(ctx, args[0])
			if err == nil && a.json() {
				var rec recordJSON
				if rec, err = a.judged(ctx, cl, e); err == nil {
					return a.writeJSON(rec)
				}
			}
			if err != nil {
				if region != "" {
					return client.RegionError(region, err)
				}
				return err
			}
			return a.printRecord(e, a.campaignPhase(ctx, cl, e))
		},
	}
	a.stuckAfterFlag(c)
	c.Flags().StringVar(&region, "region", "", "on the hub: read the record in this region's domain (README, Regions)")
	return c
}

func (a *app) listCommand() *cobra.Command {
	var (
		stateFlag string
		f         client.ListFilter
	)
	c := &cobra.Command{
		Use:   "list [flags]",
		Short: "List the tracked entities and their state",
		Long: `List the tracked entities, sorted by resource ID, read in one streaming pass over the bucket
(an entity taken out by ` + "`maintctl forget`" + ` is left out, unless --forgotten). The filters combine:
--state keeps one state (its name in any casing, or its metric value: pending,
customer_action_needed, ...); --prefix the resource IDs under a prefix (a subscription, a
resource group); --updating the entities with an update in progress; --window-before the
entities whose announced window starts before a time.

The NAME column is an ARM ID's resource group and name (rg-1/c1; the whole ID where two would
read alike); -o wide adds the window, the reason and the whole resource ID; -o name prints
the resource IDs alone.`,
		Example: "  maintctl list\n  maintctl list --state pending --window-before +7d\n  maintctl list --prefix /subscriptions/0b1f/resourceGroups/rg-1/ --updating\n  maintctl list --state CustomerActionNeeded -o json\n  maintctl list --state unplanned -o name | xargs -n1 maintctl get",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stateFlag != "" {
				s, ok := domain.ParseStateLoose(stateFlag)
				if !ok {
					return fmt.Errorf("--state %q is not a state; use one of %s", stateFlag, stateNames())
				}
				f.State = s
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			listing, err := cl.ListWhere(ctx, f)
			if err != nil {
				return err
			}
			if a.json() {
				// The facts of every entity, judged by the policies in force read once.
				in, err := cl.InForce(ctx)
				if err != nil {
					return err
				}
				now := time.Now()
				err = a.writeJSON(each(listing.Entities, func(e client.Entity) recordJSON {
					return fleet.View(e.Key, e.Revision, e.Record, now, a.stuckLimit(), in.For(e.Key))
				}))
				if err != nil {
					return err
				}
			} else if err := a.printListing(listing.Entities, f); err != nil {
				return err
			}
			if listing.Corrupt > 0 {
				return fmt.Errorf("%d record(s) could not be decoded (see the warnings)", listing.Corrupt)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&stateFlag, "state", "", "only entities in this state ("+stateNames()+")")
	fl.StringVar(&f.Prefix, "prefix", "", "only entities under this resource-ID prefix, which ends at a path segment (…/rg-1 is not …/rg-10; any casing)")
	fl.BoolVar(&f.Updating, "updating", false, "only entities with an update in progress")
	ui.TimeVar(fl, &f.WindowBefore, "window-before", "", ui.Ahead, nil, "only entities whose window starts before this time (RFC 3339, a date, or +DURATION: +7d)")
	fl.BoolVar(&f.Forgotten, "forgotten", false, "also the entities taken out of the signal by forget")
	a.completeFlag(c, "state", completeStates)
	a.completeFlag(c, "prefix", a.completeIDs(1))
	a.stuckAfterFlag(c)
	return c
}

// printListing prints the entities of a listing.
func (a *app) printListing(out []client.Entity, f client.ListFilter) error {
	if len(out) == 0 && a.format != ui.Name {
		what := "no entity has a record yet"
		if f != (client.ListFilter{}) {
			what = "no entity matches"
			if f.State != "" {
				what = "no entity in state " + string(f.State)
			}
		}
		_, err := fmt.Fprintln(a.stdout, what)
		return err
	}
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.Record.ResourceID
	}
	names := ui.ShortNames(ids)
	t := ui.NewTable(ui.Column{Header: "NAME", Shrink: true, Last: true}, ui.Column{Header: "STATE"}, ui.Column{Header: "UPDATING"},
		ui.Column{Header: "AGE"}, ui.Column{Header: "LAST ERROR", Shrink: true},
		ui.Column{Header: "WINDOW START", Wide: true}, ui.Column{Header: "WINDOW END", Wide: true},
		ui.Column{Header: "REASON", Wide: true, Shrink: true}, ui.Column{Header: "RESOURCE ID", Wide: true})
	now := time.Now()
	for i, e := range out {
		r := e.Record
		state := string(r.State)
		if r.Forgotten() {
			state = "(forgotten)"
		}
		upd := ""
		if r.Updating {
			upd = string(r.Task)
		}
		var ws, we string
		if r.Window != nil {
			ws, we = fmtTime(r.Window.Start), fmtTime(r.Window.End)
		}
		t.Row(r.ResourceID, names[i], state, upd, ui.Age(r.StateSince, now), r.LastError, ws, we, r.Reason, r.ResourceID)
	}
	return a.printTable(t)
}

// view is how tables are printed: the -o format, --no-headers, and the terminal's width when
// stdout is one.
func (a *app) view() ui.View {
	return ui.View{Format: a.format, NoHeaders: a.noHeaders, Width: ui.TerminalWidth(a.stdout, a.env)}
}

// printTable prints t as the global flags say.
func (a *app) printTable(t *ui.Tab) error { return t.Write(a.stdout, a.view()) }

// omitted says on stderr that a limit left older entries out.
func (a *app) omitted(n, limit int, what string) {
	if n > 0 {
		fmt.Fprintf(a.stderr, "%d older %s not shown (--limit %d; --limit 0 shows them all)\n", n, what, limit)
	}
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

// Bounds of the reads of the whole fleet's history and notices, when none is given.
const (
	fleetHistorySince = "24h"
	fleetNoticesSince = "7d"
	fleetLimit        = 1000
)

// bounds applies the default bounds of a read of the whole fleet (no RESOURCE-ID) to the flags
// not given: a read of one entity is short and reads everything the stream keeps.
func bounds(cmd *cobra.Command, f *client.StreamFilter, since string) {
	if f.ResourceID != "" {
		return
	}
	if !cmd.Flags().Changed("since") {
		_ = cmd.Flags().Set("since", since)
		cmd.Flags().Lookup("since").Changed = false
	}
	if !cmd.Flags().Changed("limit") {
		f.Limit = fleetLimit
	}
}

func (a *app) historyCommand() *cobra.Command {
	var f client.StreamFilter
	c := &cobra.Command{
		Use:   "history [flags] [RESOURCE-ID]",
		Short: "List the outcome events of an entity, or of the fleet, oldest first",
		Long: `List the outcome event of every command sent for an entity, oldest first, from the
MAINT_EVENTS stream: time, task, outcome, the state before and after, the rejection code
and message (or the reason); -o wide adds the actor, the force, the reason and the command id.

Without a RESOURCE-ID, the history of the whole fleet, bounded: by default the last ` + fleetHistorySince + `
and the newest ` + strconv.Itoa(fleetLimit) + ` events of those (--since and --limit change both; --since 0
--limit 0 reads all the stream keeps). With one, everything kept for that entity.`,
		Example:           "  maintctl history " + exampleID + "\n  maintctl history --since 2h\n  maintctl history --since 2026-12-14 --limit 0 -o json",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeIDs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				f.ResourceID = args[0]
			}
			bounds(cmd, &f, fleetHistorySince)
			ctx, cl, done, err := a.readSession(cmd.Context(), f.ResourceID)
			if err != nil {
				return err
			}
			defer done()
			page, err := cl.Events(ctx, f)
			if err != nil {
				return err
			}
			return a.printHistory(page, f)
		},
	}
	streamFlags(c, &f, "events")
	return c
}

// streamFlags are the bounds of a read of a long stream.
func streamFlags(c *cobra.Command, f *client.StreamFilter, what string) {
	ui.TimeVar(c.Flags(), &f.Since, "since", "", ui.Ago, nil, "only the "+what+" stored since this time: a duration ago (24h, 7d), a date or an RFC 3339 time; 0: all")
	c.Flags().IntVar(&f.Limit, "limit", 0, "only the newest N "+what+" (0: all)")
}

// readSession opens a read session, checking a RESOURCE-ID when one is given; the fleet's
// reads may take longer.
func (a *app) readSession(parent context.Context, resourceID string) (context.Context, *client.Client, func(), error) {
	if resourceID != "" {
		return a.entitySession(parent, resourceID)
	}
	return a.session(parent, 5*time.Minute)
}

func (a *app) printHistory(page client.Page[client.StoredEvent], f client.StreamFilter) error {
	evs := page.Items
	if a.json() {
		return a.writeJSON(each(evs, func(ev client.StoredEvent) domain.Event { return ev.Event }))
	}
	defer a.omitted(page.Omitted, f.Limit, "events")
	if len(evs) == 0 && a.format != ui.Name {
		what := "no command was ever sent for " + f.ResourceID
		if f.ResourceID == "" {
			what = "no outcome event in this period"
		}
		_, err := fmt.Fprintln(a.stdout, what)
		return err
	}
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ResourceID
	}
	names := ui.ShortNames(ids)
	fleet := f.ResourceID == ""
	t := ui.NewTable(ui.Column{Header: "TIME"}, ui.Column{Header: "NAME", Shrink: true, Last: true, Wide: !fleet}, ui.Column{Header: "TASK"},
		ui.Column{Header: "OUTCOME"}, ui.Column{Header: "FROM → TO"}, ui.Column{Header: "DETAIL", Shrink: true},
		ui.Column{Header: "ACTOR", Wide: true}, ui.Column{Header: "FORCE", Wide: true}, ui.Column{Header: "REASON", Wide: true, Shrink: true},
		ui.Column{Header: "COMMAND ID", Wide: true}, ui.Column{Header: "RESOURCE ID", Wide: true})
	for i, ev := range evs {
		force := ""
		if ev.Force {
			force = "forced"
		}
		t.Row(ev.ResourceID, fmtTime(ev.At), names[i], string(ev.Task), string(ev.Outcome),
			dash(string(ev.From))+" → "+dash(string(ev.To)), cmp.Or(eventDetail(ev.Event), ev.Reason), ev.Actor, force, ev.Reason, ev.CommandID, ev.ResourceID)
	}
	return a.printTable(t)
}

// each is f of every item, in order (an empty slice, not nil, for none: JSON's []).
func each[T, U any](items []T, f func(T) U) []U {
	out := make([]U, len(items))
	for i, v := range items {
		out[i] = f(v)
	}
	return out
}

// eventDetail is what an event says besides its transition: the rejection, the message, the
// error of a failed update.
func eventDetail(ev domain.Event) string {
	switch {
	case ev.Code != "":
		return rejectionText(ev)
	case ev.Message != "":
		return ev.Message
	case ev.Error != "":
		return "update failed: " + ev.Error
	}
	return ""
}

// writeEventRow writes one tab-separated event row (with the resource ID first when withID).
func writeEventRow(w io.Writer, ev domain.Event, withID bool) {
	force := "-"
	if ev.Force {
		force = "forced"
	}
	detail := dash(eventDetail(ev))
	id := ""
	if withID {
		id = ev.ResourceID + "\t"
	}
	fmt.Fprintf(w, "%s\t%s%s\t%s\t%s\t%s → %s\t%s\t%s\t%s\n", fmtTime(ev.At), id, dash(ev.Actor), dash(string(ev.Task)),
		ev.Outcome, dash(string(ev.From)), dash(string(ev.To)), force, oneLine(dash(ev.Reason), 60), oneLine(detail, 0))
}

func (a *app) noticesCommand() *cobra.Command {
	var (
		f     client.NoticeFilter
		kinds []string
	)
	c := &cobra.Command{
		Use:   "notices [flags] [RESOURCE-ID]",
		Short: "List lifecycle notices (reminders, due, overdue, stuck), oldest first",
		Long: `List the lifecycle notices kept in MAINT_NOTICES, oldest first: of every entity, or of the
one RESOURCE-ID. A notice says that an announced window starts within its lead time
(reminder), has started with the entity still Pending (due), or has ended with it still Pending
(overdue), or that an update has run longer than the stuck limit (stuck).

Of the whole fleet, bounded: by default the last ` + fleetNoticesSince + ` and the newest ` + strconv.Itoa(fleetLimit) + ` notices of those
(--since and --limit change both; --since 0 --limit 0 reads all the stream keeps). Of one
entity, everything kept. --kind keeps some kinds (reminder, due, overdue, stuck).`,
		Example:           "  maintctl notices\n  maintctl notices --kind overdue,stuck --since 1d\n  maintctl notices " + exampleID + "\n  maintctl notices -o json | jq -r '.[] | .kind'",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeIDs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				f.ResourceID = args[0]
			}
			var err error
			if f.Kinds, err = parseKinds(kinds); err != nil {
				return err
			}
			bounds(cmd, &f.StreamFilter, fleetNoticesSince)
			ctx, cl, done, err := a.readSession(cmd.Context(), f.ResourceID)
			if err != nil {
				return err
			}
			defer done()
			page, err := cl.NoticesWhere(ctx, f)
			if err != nil {
				return err
			}
			return a.printNotices(page, f)
		},
	}
	streamFlags(c, &f.StreamFilter, "notices")
	c.Flags().StringSliceVar(&kinds, "kind", nil, "only notices of these kinds, comma-separated: reminder, due, overdue, stuck")
	a.completeFlag(c, "kind", completeWords(domain.NoticeKinds...))
	return c
}

// parseKinds reads --kind.
func parseKinds(words []string) ([]domain.NoticeKind, error) {
	var out []domain.NoticeKind
	for _, w := range words {
		k := domain.NoticeKind(strings.ToLower(strings.TrimSpace(w)))
		if !slices.Contains(domain.NoticeKinds, k) {
			return nil, fmt.Errorf("--kind %q is not a notice kind; use reminder, due, overdue or stuck", w)
		}
		out = append(out, k)
	}
	return out, nil
}

func (a *app) printNotices(page client.Page[client.StoredNotice], f client.NoticeFilter) error {
	ns := page.Items
	if a.json() {
		return a.writeJSON(each(ns, func(n client.StoredNotice) domain.Notice { return n.Notice }))
	}
	defer a.omitted(page.Omitted, f.Limit, "notices")
	if len(ns) == 0 && a.format != ui.Name {
		what := "any entity"
		if f.ResourceID != "" {
			what = f.ResourceID
		}
		_, err := fmt.Fprintf(a.stdout, "no notice was sent for %s\n", what)
		return err
	}
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ResourceID
	}
	names := ui.ShortNames(ids)
	t := ui.NewTable(ui.Column{Header: "TIME"}, ui.Column{Header: "NAME", Shrink: true, Last: true}, ui.Column{Header: "KIND"},
		ui.Column{Header: "LEAD"}, ui.Column{Header: "STATE"}, ui.Column{Header: "WINDOW START"},
		ui.Column{Header: "WINDOW END", Wide: true}, ui.Column{Header: "STATE SINCE", Wide: true}, ui.Column{Header: "RESOURCE ID", Wide: true})
	for i, n := range ns {
		var ws, we string
		if n.Window != nil {
			ws, we = fmtTime(n.Window.Start), fmtTime(n.Window.End)
		}
		t.Row(n.ResourceID, fmtTime(n.At), names[i], string(n.Kind), client.NoticeLead(n.Notice), string(n.State), ws, we, fmtTime(n.StateSince), n.ResourceID)
	}
	return a.printTable(t)
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
		since    time.Time
		noFollow bool
	)
	c := &cobra.Command{
		Use:   "watch [flags] [RESOURCE-ID]",
		Short: "Follow outcome events and notices live (of every entity, or of one)",
		Long: `Print outcome events and lifecycle notices as they are stored, until interrupted
(Ctrl-C): of every entity, or of the one RESOURCE-ID. A notice's line starts with "notice".
With -o json, one JSON document per line; a notice is {"notice": {...}}. --since first
replays what was stored since then (a duration ago, a date or a time), events and notices
merged in the order of their "at", then follows live from there without a gap or a
repeat; --no-follow prints that replay and exits (by default the replay of the last ` + noFollowSince + `).`,
		Example:           "  maintctl watch\n  maintctl watch " + exampleID + "\n  maintctl watch --since 1h -o json | jq .outcome\n  maintctl watch --since 1d --no-follow > timeline.txt",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeIDs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
				if _, err := domain.Key(id); err != nil {
					return fmt.Errorf("RESOURCE-ID %q: %w", id, err)
				}
			}
			if noFollow && !cmd.Flags().Changed("since") {
				_ = cmd.Flags().Set("since", noFollowSince)
			}
			if noFollow && since.IsZero() {
				return errors.New("--no-follow prints the replay of --since and exits: give a --since other than 0 (e.g. --since 1h)")
			}
			ctx := cmd.Context()
			cctx, ccancel := context.WithTimeout(ctx, readTimeout)
			defer ccancel()
			cl, err := a.connect(cctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			o := client.TimelineOptions{ResourceID: id, NoFollow: noFollow, Since: since}
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
	ui.TimeVar(c.Flags(), &since, "since", "", ui.Ago, nil, "first replay what was stored since this time, in the order of its at: a duration ago (1h, 7d), a date or an RFC 3339 time")
	c.Flags().BoolVar(&noFollow, "no-follow", false, "print the replay of --since (default "+noFollowSince+") and exit")
	return c
}

// noFollowSince is the replay of `watch --no-follow` without --since.
const noFollowSince = "1h"

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
	var record bool
	c := &cobra.Command{
		Use:   "key RESOURCE-ID...",
		Short: "Print the entity key of resource IDs (offline)",
		Long: `Print the key of each RESOURCE-ID, one per line: lower-cased, the leading "/" dropped,
[a-z0-9_/-] kept and every other byte written as "=" and two hex digits. Commands go to
maint.cmd.<key> and outcome events to maint.evt.<key>. With --record, print where the record
is instead: its cell's bucket and its key there (<subscription>.<resource group>.<key>), as
` + "`nats kv get`" + ` takes them. -o json gives all of them. Needs no server.`,
		Example:           "  maintctl key " + exampleID + "\n  nats kv get $(maintctl key --record " + exampleID + ")",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeIDs(1 << 20),
		RunE: func(_ *cobra.Command, args []string) error {
			keys := make([]string, 0, len(args))
			for _, id := range args {
				k, err := domain.Key(id)
				if err != nil {
					return fmt.Errorf("RESOURCE-ID %q: %w", id, err)
				}
				keys = append(keys, k)
			}
			doc := func(i int) map[string]string {
				k := keys[i]
				return map[string]string{"resourceId": args[i], "key": k,
					"bucket": domain.CellOf(k).RecordsBucket(), "recordKey": domain.Located(k),
					"eventsStream": domain.EventStreamOf(k), "eventSubject": domain.EventSubject(k),
					"noticesStream": domain.NoticeStreamOf(k), "noticeSubject": domain.NoticeSubject(k)}
			}
			if a.json() {
				if len(keys) == 1 {
					return a.writeJSON(doc(0))
				}
				docs := make([]map[string]string, len(keys))
				for i := range keys {
					docs[i] = doc(i)
				}
				return a.writeJSON(docs)
			}
			for _, k := range keys {
				line := k
				if record {
					line = domain.CellOf(k).RecordsBucket() + " " + domain.Located(k)
				}
				if _, err := fmt.Fprintln(a.stdout, line); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&record, "record", false, "print the record's bucket and its key there")
	return c
}
