package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	campaignfn "maintsignals/functions/campaign"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
)

// createFlags are the flags of `campaign create`.
type createFlags struct {
	lists, prefixes []string
	specFile        string

	reason, task, length, earliest, deadline, across, slot, seed, lead string
	maxPerSlot, maxPerSub                                              int

	dryRun, plan bool
	minNotice    time.Duration
	control      controlFlags
}

// specFlags are the flags that give the spec instead of --spec FILE.
var specFlags = []string{"reason", "task", "window-length", "earliest", "deadline", "across", "slot", "max-per-slot", "max-per-subscription", "seed", "announce-lead"}

func (a *app) campaignCreateCommand() *cobra.Command {
	var f createFlags
	c := &cobra.Command{
		Use:   "create [flags] ID (--list FILE | --prefix P)…",
		Short: "Create a campaign from a list of resource IDs and/or prefixes (or plan it: --dry-run)",
		Long: `Create a campaign: its spec comes from --spec FILE (the JSON of infra/docs/campaigns.md)
or from the flags; --list FILE (one resource ID a line; blank lines and # comments ignored) and
--prefix P (the entities tracked now under P) fill its selection. The list is stored in the
campaign-lists Object Store under its SHA-256, then the create command is sent and its
outcome awaited; the campaign function plans every entity and announces each window when its
time comes.

--dry-run plans the campaign here, as the campaign function would plan it now (the same
selection, policies and rules; give the command function's --min-notice), prints the number
of windows per slot and the skips, and writes nothing: no list is stored, no command sent.
With -o json it prints the plan as JSON, with every entity's window with --plan.`,
		Example: `  maintctl campaign create pucm-2026-12 --list clusters.txt --reason "PUCM: control plane upgrade" \
    --earliest 2026-12-15T00:00:00Z --deadline 2027-01-15T00:00:00Z --across 336h --slot 15m \
    --max-per-slot 500 --max-per-subscription 20 --announce-lead 336h --dry-run
  maintctl campaign create pucm-2026-12 --list clusters.txt --spec pucm.json`,
		Args: oneCampaign,
		RunE: func(cmd *cobra.Command, args []string) error { return a.createCampaign(cmd, args[0], f) },
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.lists, "list", nil, "file of resource IDs, one a line (repeatable: the files make one list)")
	fl.StringArrayVar(&f.prefixes, "prefix", nil, "select the entities tracked under this resource-ID prefix (repeatable)")
	fl.StringVar(&f.specFile, "spec", "", "JSON file of the campaign's spec (instead of the spec flags)")
	fl.StringVar(&f.reason, "reason", "", "why: the reason of every announcement")
	fl.StringVar(&f.task, "task", string(domain.TaskEverything), "the update task the campaign announces")
	fl.StringVar(&f.length, "window-length", "4h", "every window's length")
	fl.StringVar(&f.earliest, "earliest", "", "the first slot's start (RFC 3339 or +DURATION from now; required without --spec)")
	fl.StringVar(&f.deadline, "deadline", "", "every window ends by then (RFC 3339 or +DURATION; required without --spec)")
	fl.StringVar(&f.across, "across", "", "the span the preferred slots spread over, a whole number of slots (required without --spec)")
	fl.StringVar(&f.slot, "slot", "15m", "the slots' length")
	fl.IntVar(&f.maxPerSlot, "max-per-slot", 500, "at most this many windows start in one slot")
	fl.IntVar(&f.maxPerSub, "max-per-subscription", 0, "at most this many windows of one subscription start in one slot (0: no cap of its own)")
	fl.StringVar(&f.seed, "seed", "", "salt of the preferred slots (default: the campaign ID)")
	fl.StringVar(&f.lead, "announce-lead", "336h", "how long before its window an entity is announced")
	fl.BoolVar(&f.dryRun, "dry-run", false, "plan here and print the plan; write nothing")
	fl.BoolVar(&f.plan, "plan", false, "with --dry-run -o json: every entity's window or skip")
	fl.DurationVar(&f.minNotice, "min-notice", 0, "with --dry-run: the command function's --min-notice")
	addControlFlags(c, &f.control)
	return c
}

// document builds the spec of campaign id from --spec or the flags, and reads the lists.
func (f createFlags) document(cmd *cobra.Command, id string, now time.Time) (campaignspec.Document, *campaign.List, []byte, error) {
	var d campaignspec.Document
	if f.specFile != "" {
		for _, name := range specFlags {
			if cmd.Flags().Changed(name) {
				return d, nil, nil, fmt.Errorf("--%s: give the spec in --spec %s or in flags, not both", name, f.specFile)
			}
		}
		b, err := os.ReadFile(f.specFile)
		if err != nil {
			return d, nil, nil, fmt.Errorf("--spec: %w", err)
		}
		var rej *domain.Rejection
		if d, rej = campaignspec.DecodeDocument(b); rej != nil {
			return d, nil, nil, fmt.Errorf("--spec %s: %w", f.specFile, rej)
		}
	} else {
		var err error
		if d, err = f.fromFlags(now); err != nil {
			return d, nil, nil, err
		}
	}
	if d.ID == "" {
		d.ID = id
	}
	if d.ID != id {
		return d, nil, nil, fmt.Errorf("the spec is campaign %q, not %q", d.ID, id)
	}
	d.Selection.Prefixes = append(d.Selection.Prefixes, f.prefixes...)
	if len(f.lists) == 0 {
		return d, nil, nil, nil
	}
	l, data, err := readLists(f.lists)
	if err != nil {
		return d, nil, nil, err
	}
	ref := l.Ref(l.SHA256)
	d.Selection.List = &ref
	return d, l, data, nil
}

// fromFlags is the spec of the flags.
func (f createFlags) fromFlags(now time.Time) (campaignspec.Document, error) {
	switch {
	case f.earliest == "", f.deadline == "", f.across == "":
		return campaignspec.Document{}, fmt.Errorf("give --earliest, --deadline and --across (or --spec FILE)")
	}
	earliest, err := parseTime(f.earliest, now)
	if err != nil {
		return campaignspec.Document{}, fmt.Errorf("--earliest: %w", err)
	}
	deadline, err := parseTime(f.deadline, now)
	if err != nil {
		return campaignspec.Document{}, fmt.Errorf("--deadline: %w", err)
	}
	return campaignspec.Document{
		Reason: f.reason, Task: domain.Task(f.task),
		Window:       campaignspec.WindowDocument{Length: f.length, Earliest: earliest.Format(time.RFC3339), Deadline: deadline.Format(time.RFC3339)},
		Spread:       campaignspec.SpreadDocument{Across: f.across, Slot: f.slot, MaxPerSlot: f.maxPerSlot, MaxPerSlotPerSubscription: f.maxPerSub, Seed: f.seed},
		AnnounceLead: f.lead,
	}, nil
}

func (a *app) createCampaign(cmd *cobra.Command, id string, f createFlags) error {
	now := time.Now()
	d, list, data, err := f.document(cmd, id, now)
	if err != nil {
		return err
	}
	s, rej := d.Compile()
	if rej != nil {
		return fmt.Errorf("the spec: %w", rej)
	}
	if f.dryRun {
		return a.dryRun(cmd.Context(), s, list, f, now)
	}
	if f.plan {
		return fmt.Errorf("--plan goes with --dry-run")
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.control.timeout)
	defer cancel()
	if list != nil {
		cl, err := a.connect(ctx, f.control.timeout)
		if err != nil {
			return err
		}
		stored, err := campaignstore.PutList(ctx, cl.JS, list, data)
		cl.Close()
		if err != nil {
			return err
		}
		a.log.Info("list", "object", list.SHA256, "entities", list.Count(), "stored", stored)
	}
	doc := s.Document()
	_, err = a.sendControl(ctx, campaign.Control{Campaign: id, Action: campaign.ActionCreate, Spec: &doc}, f.control)
	return err
}

// dryRun plans s as the campaign function would now (campaignfn.Plan), and prints the plan.
func (a *app) dryRun(parent context.Context, s *campaignspec.Spec, list *campaign.List, f createFlags, now time.Time) error {
	ctx, cl, done, err := a.campaignSession(parent)
	if err != nil {
		return err
	}
	defer done()
	var cache campaignstore.PolicyCache
	plan, rej, err := campaignfn.Plan(ctx, cl.JS, s, list, &cache, campaign.Settings{MinNotice: f.minNotice}, now)
	if err != nil {
		return err
	}
	if rej != nil {
		return fmt.Errorf("the selection: %w", rej)
	}
	if a.json() {
		return plan.WriteJSON(a.stdout, f.plan)
	}
	return plan.Render(a.stdout)
}
