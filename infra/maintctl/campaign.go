package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

// maintctl campaign …: fleet campaigns (infra/docs/campaigns.md).

func (a *app) campaignCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "campaign",
		Short: "Fleet campaigns: one announcement across many entities, planned, announced, burned down",
		Long: `A campaign announces one piece of work across many entities: it plans every entity's window
(spread over slots, inside the customers' policies and the notice, within caps per slot and
per subscription, before the deadline), announces each window when its time comes (an
ordinary Pending, exactly once), and tracks every entity to the end of its update. The
campaign function (run by ` + "`maintctl up`" + `, or ` + "`maintctl function campaign`" + `) does the work;
these commands create, watch and steer campaigns.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(a.campaignCreateCommand(), a.campaignStatusCommand(), a.campaignListCommand(), a.campaignEntitiesCommand())
	c.AddCommand(a.campaignControlCommands()...)
	return c
}

// oneCampaign is the argument check of the commands that take one campaign ID.
func oneCampaign(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) != 1:
		return fmt.Errorf("%s needs one campaign ID, got %d arguments (see `%s --help`)", cmd.Name(), len(args), cmd.CommandPath())
	case !campaignspec.ValidID(args[0]):
		return fmt.Errorf("campaign ID %q: 1-%d characters of [a-z0-9-]", args[0], campaignspec.MaxIDLength)
	}
	return nil
}

// controlFlags are the flags of the commands that send a campaign command.
type controlFlags struct {
	id      string
	timeout time.Duration
}

func addControlFlags(c *cobra.Command, f *controlFlags) {
	c.Flags().StringVar(&f.id, "id", "", "command id, also sent as Nats-Msg-Id: sending the same id again changes nothing (default: a fresh one)")
	c.Flags().DurationVar(&f.timeout, "timeout", time.Minute, "how long to wait for the outcome")
}

// sendControl sends a campaign command, waits for its outcome and prints it.
func (a *app) sendControl(ctx context.Context, ctl campaign.Control, f controlFlags) (campaign.Outcome, error) {
	if f.timeout <= 0 {
		return campaign.Outcome{}, fmt.Errorf("--timeout must be positive, got %s", f.timeout)
	}
	ctl.ID = f.id
	if ctl.ID == "" {
		ctl.ID = client.NewCommandID("maintctl-" + string(ctl.Action))
	}
	if ctl.Actor == "" {
		ctl.Actor = a.env("USER")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cl, err := a.connect(ctx, f.timeout)
	if err != nil {
		return campaign.Outcome{}, err
	}
	defer cl.Close()
	o, err := cl.SendCampaign(ctx, ctl)
	if errors.Is(err, client.ErrNoOutcome) {
		return o, fmt.Errorf("%w. Is a campaign function running? try `maintctl up` (or `maintctl function campaign`)", err)
	}
	if o.Outcome == "" {
		return o, err
	}
	if perr := a.printOutcome(o); perr != nil && err == nil {
		err = perr
	}
	return o, err
}

func (a *app) printOutcome(o campaign.Outcome) error {
	if a.json() {
		return a.writeJSON(o)
	}
	var line string
	switch o.Outcome {
	case domain.OutcomeApplied:
		line = fmt.Sprintf("applied %s: campaign %s is %s (generation %d)", o.Action, o.Campaign, o.Status, o.Generation)
	case domain.OutcomeDuplicate:
		line = fmt.Sprintf("duplicate %s: %s; campaign %s is %s", o.Action, o.Message, o.Campaign, o.Status)
	default:
		line = fmt.Sprintf("%s %s: %s", o.Outcome, o.Action, rejectionText(domain.Event{Code: o.Code, Target: o.Target, Message: o.Message}))
	}
	_, err := fmt.Fprintf(a.stdout, "%s\ncommand %s\n", line, o.CommandID)
	return err
}

func (a *app) campaignControlCommands() []*cobra.Command {
	type verb struct {
		action      campaign.Action
		short, long string
		withdraw    *bool
		phase, wave *string
	}
	var (
		withdraw    bool
		phase, wave string
	)
	verbs := []verb{
		{action: campaign.ActionPause, short: "Stop announcing (with --withdraw, withdraw what is announced and not started)", withdraw: &withdraw,
			long: `Stop announcing: no new window goes out; the windows announced stand, and updates go on. With
--withdraw, each entity announced and not started gets a None that applies only while the
window is still the campaign's (an entity whose window became another's refuses it and is
superseded); withdrawn entities are planned again, in a new generation, for after resume.`},
		{action: campaign.ActionResume, short: "Announce again after a pause or a halt",
			long: `Announce again after a pause or a halt. The windows that would now start sooner than the notice
in force are planned again, each at least the notice ahead. After a halt, the halted wave's
threshold no longer halts the campaign.`},
		{action: campaign.ActionCancel, short: "Cancel for good: withdraw what has not started; updates in progress are tracked to their end",
			long: `Cancel for good: the campaign is cancelled at once, what is planned is cancelled, what is
announced and not started is withdrawn; updates in progress are left alone and tracked to
their end, and the campaign then completes as cancelled.`},
		{action: campaign.ActionRetry, short: "Plan and announce anew the entities in a phase (failed, skipped, rejected)", phase: &phase,
			long: `Plan and announce anew the entities in --phase (failed, skipped or rejected), as a new generation
with new command ids; the other entities and their history are untouched.`},
		{action: campaign.ActionApprove, short: "Approve a wave with a manual gate", wave: &wave,
			long: `Approve a wave with gate manual: it starts once every wave before it is finished. A wave
without a gate needs no approval (the command is applied and changes nothing).`},
	}
	var out []*cobra.Command
	for _, v := range verbs {
		var f controlFlags
		c := &cobra.Command{
			Use: string(v.action) + " [flags] ID", Short: v.short, Long: v.long, Args: oneCampaign,
			RunE: func(cmd *cobra.Command, args []string) error {
				ctl := campaign.Control{Campaign: args[0], Action: v.action, Withdraw: withdraw, Phase: campaign.Phase(phase), Wave: wave}
				_, err := a.sendControl(cmd.Context(), ctl, f)
				return err
			},
		}
		switch {
		case v.withdraw != nil:
			c.Flags().BoolVar(v.withdraw, "withdraw", false, "withdraw the windows announced and not started")
		case v.phase != nil:
			c.Flags().StringVar(v.phase, "phase", "", "the phase to retry: failed, skipped or rejected (required)")
			_ = c.MarkFlagRequired("phase")
		case v.wave != nil:
			c.Flags().StringVar(v.wave, "wave", "", "the wave to approve (required)")
			_ = c.MarkFlagRequired("wave")
		}
		addControlFlags(c, &f)
		out = append(out, c)
	}
	return out
}

// campaignSession opens a read session.
func (a *app) campaignSession(ctx context.Context) (context.Context, *client.Client, func(), error) {
	return a.session(ctx, readTimeout)
}

func (a *app) campaignListCommand() *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List the campaigns, with their status and counts", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := a.campaignSession(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			cs, err := cl.Campaigns(ctx)
			if err != nil {
				return err
			}
			reports := make([]campaign.Report, len(cs))
			for i, c := range cs {
				reports[i] = campaign.NewReport(c, c.Tally)
			}
			if a.json() {
				return a.writeJSON(reports)
			}
			t := ui.NewTable(ui.Column{Header: "ID"}, ui.Column{Header: "STATUS"}, ui.Column{Header: "ENTITIES"}, ui.Column{Header: "DONE"},
				ui.Column{Header: "FINISHED"}, ui.Column{Header: "GENERATION"}, ui.Column{Header: "DEADLINE"})
			for i, r := range reports {
				t.Row(r.ID, r.ID, string(r.Status), strconv.Itoa(r.Entities), strconv.Itoa(r.Done), strconv.Itoa(r.Finished), strconv.Itoa(r.Generation), fmtTime(cs[i].Compiled().Deadline))
			}
			return a.printWhole(t)
		},
	}
}

// entityJSON is one entity of `campaign entities -o json`.
type entityJSON struct {
	ResourceID string         `json:"resourceId"`
	Phase      campaign.Phase `json:"phase"`
	Generation int            `json:"generation"`
	Window     *domain.Window `json:"window"`
	Reason     string         `json:"reason,omitempty"`
}

func (a *app) campaignEntitiesCommand() *cobra.Command {
	var phase string
	c := &cobra.Command{
		Use: "entities [flags] ID", Short: "List a campaign's entities with their phase, generation and window", Args: oneCampaign,
		Example: "  maintctl campaign entities pucm-2026-12 --phase failed",
		RunE: func(cmd *cobra.Command, args []string) error {
			if phase != "" && !campaign.Phase(phase).Valid() {
				return fmt.Errorf("--phase %q: one of %v", phase, campaign.Phases)
			}
			ctx, cl, done, err := a.campaignSession(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := cl.Campaign(ctx, args[0]); err != nil {
				return err
			}
			var out []entityJSON
			err = cl.CampaignEntities(ctx, args[0], func(s campaignstore.Stored) error {
				if e := s.Entity; phase == "" || string(e.Phase) == phase {
					out = append(out, entityJSON{ResourceID: e.ResourceID, Phase: e.Phase, Generation: e.Generation, Window: e.Window, Reason: e.Reason})
				}
				return nil
			})
			if err != nil {
				return err
			}
			slices.SortFunc(out, func(x, y entityJSON) int { return strings.Compare(x.ResourceID, y.ResourceID) })
			if a.json() {
				if out == nil {
					out = []entityJSON{}
				}
				return a.writeJSON(out)
			}
			t := ui.NewTable(ui.Column{Header: "RESOURCE"}, ui.Column{Header: "PHASE"}, ui.Column{Header: "GEN"}, ui.Column{Header: "WINDOW"}, ui.Column{Header: "REASON"})
			for _, e := range out {
				var w string // "-" when none
				if e.Window != nil {
					w = fmtTime(e.Window.Start) + " → " + fmtTime(e.Window.End)
				}
				t.Row(e.ResourceID, e.ResourceID, string(e.Phase), strconv.Itoa(e.Generation), w, e.Reason)
			}
			return a.printWhole(t)
		},
	}
	c.Flags().StringVar(&phase, "phase", "", "only the entities in this phase ("+phaseNames()+")")
	return c
}

func phaseNames() string {
	names := make([]string, len(campaign.Phases))
	for i, p := range campaign.Phases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// readLists reads list files into one list (their lines together), as the CLI uploads it.
func readLists(paths []string) (*campaign.List, []byte, error) {
	var buf bytes.Buffer
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--list: %w", err)
		}
		buf.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	l, err := campaign.ParseList(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, nil, fmt.Errorf("--list %s: %w", strings.Join(paths, ", "), err)
	}
	return l, buf.Bytes(), nil
}

// printWhole prints t as the campaign and policy lists always printed: whole and with its
// headers, whatever -o and the terminal's width.
func (a *app) printWhole(t *ui.Tab) error { return t.Write(a.stdout, ui.View{Format: ui.Table}) }
