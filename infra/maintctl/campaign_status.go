package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
)

func (a *app) campaignStatusCommand() *cobra.Command {
	var watch bool
	c := &cobra.Command{
		Use:   "status [flags] ID",
		Short: "Show a campaign's status and burndown (--watch: follow it)",
		Long: `Show a campaign's status, its entities per phase (the burndown), how many are done and
finished, and its waves. With --watch it follows the campaign until it completes (or ^C):
on a terminal as a progress bar on stderr, elsewhere as one line per change; with -o json,
one JSON document per change.`,
		Args: oneCampaign,
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch {
				return a.watchCampaign(cmd, args[0])
			}
			ctx, cl, done, err := a.campaignSession(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			c, err := cl.Campaign(ctx, args[0])
			if err != nil {
				return err
			}
			return a.printCampaign(c)
		},
	}
	c.Flags().BoolVarP(&watch, "watch", "w", false, "follow the campaign until it completes")
	return c
}

func (a *app) printCampaign(c *campaign.Campaign) error {
	r := campaign.NewReport(c, c.Tally)
	if a.json() {
		return a.writeJSON(r)
	}
	s := c.Compiled()
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "campaign\t%s: %s, generation %d\n", r.ID, r.Status, r.Generation)
	fmt.Fprintf(tw, "work\t%s%s\n", s.Task, dashIfEmpty(": ", s.Reason))
	fmt.Fprintf(tw, "windows\t%s each, from %s, by %s\n", fmtDuration(s.Length), fmtTime(s.Earliest), fmtTime(s.Deadline))
	fmt.Fprintf(tw, "entities\t%d: %d done (%d%%), %d finished\n", r.Entities, r.Done, percent(r.Done, r.Entities), r.Finished)
	for _, p := range campaign.Phases {
		fmt.Fprintf(tw, "  %s\t%d\n", p, r.Phases.Of(p))
	}
	for _, w := range r.Waves {
		state := "waiting"
		switch {
		case w.Opened:
			state = "open"
		case w.Gate != "" && !w.Approved:
			state = "waiting for approve"
		}
		fmt.Fprintf(tw, "wave %s\t%s: %d entities, %d done, %d failed\n", w.Name, state, w.Entities, w.Phases.Done(), w.Phases.Of(campaign.PhaseFailed))
	}
	return tw.Flush()
}

func dashIfEmpty(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func fmtDuration(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}

func percent(n, of int) int {
	if of == 0 {
		return 0
	}
	return n * 100 / of
}

// watchCampaign follows a campaign until it is finished or the command is interrupted.
func (a *app) watchCampaign(cmd *cobra.Command, id string) error {
	cl, err := a.connect(cmd.Context(), 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	show := a.watchLines()
	if f, ok := a.stderr.(*os.File); ok && !a.json() && term.IsTerminal(int(f.Fd())) {
		bar := newCampaignBar(a.stderr)
		defer bar.close()
		show = bar.show
	}
	var last *campaign.Campaign
	err = cl.WatchCampaign(cmd.Context(), id, func(c *campaign.Campaign) error {
		if c == nil {
			return fmt.Errorf("%w: %s (it is created by `maintctl campaign create`)", client.ErrNoCampaign, id)
		}
		last = c
		if err := show(c); err != nil {
			return err
		}
		if c.Finished {
			return campaignstore.ErrStopWatch
		}
		return nil
	})
	if errors.Is(err, cmd.Context().Err()) && cmd.Context().Err() != nil {
		err = nil // interrupted: that is how a watch ends
	}
	if err != nil || last == nil || a.json() {
		return err
	}
	fmt.Fprintln(a.stdout)
	return a.printCampaign(last)
}

// watchLines prints one line per change of what a person reads (or, with -o json, one JSON
// document per change of the report): a write of the campaign that changes none of it, such
// as a pass that only moved its place in the events, prints nothing.
func (a *app) watchLines() func(*campaign.Campaign) error {
	var last string
	return func(c *campaign.Campaign) error {
		r := campaign.NewReport(c, c.Tally)
		if a.json() {
			b, err := json.Marshal(r)
			if err != nil || string(b) == last {
				return err
			}
			last = string(b)
			return writeJSONLine(a.stdout, r)
		}
		line := fmt.Sprintf("%s %s: %d/%d done, %d finished; %s", r.ID, r.Status, r.Done, r.Entities, r.Finished, phaseLine(r.Phases))
		if line == last {
			return nil
		}
		last = line
		_, err := fmt.Fprintf(a.stdout, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
		return err
	}
}

// phaseLine lists the phases that hold entities: "announced=20 in_progress=3".
func phaseLine(c campaign.Counts) string {
	var parts []string
	for _, p := range campaign.Phases {
		if n := c.Of(p); n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", p, n))
		}
	}
	if len(parts) == 0 {
		return "no entities"
	}
	return strings.Join(parts, " ")
}

// campaignBar is the progress bar of a watch on a terminal: the entities done of the selection,
// with the status and the phases not done beside it.
type campaignBar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newCampaignBar(w io.Writer) *campaignBar { return &campaignBar{w: w} }

func (b *campaignBar) show(c *campaign.Campaign) error {
	r := campaign.NewReport(c, c.Tally)
	var open campaign.Counts
	for _, p := range campaign.Phases {
		if !p.Done() {
			open.Add(p, r.Phases.Of(p))
		}
	}
	desc := fmt.Sprintf("%s %s: %s", r.ID, r.Status, phaseLine(open))
	if b.bar == nil {
		// The first frame carries the description already (a blank state is drawn at once).
		b.bar = progressbar.NewOptions(max(r.Entities, 1),
			progressbar.OptionSetWriter(b.w), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(false), progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionShowDescriptionAtLineEnd(), progressbar.OptionFullWidth(), progressbar.OptionSetDescription(desc))
	}
	b.bar.ChangeMax(max(r.Entities, 1))
	b.bar.Describe(desc)
	return b.bar.Set(r.Done)
}

// close leaves the last frame as drawn: a campaign that completed with failures is not all
// done, and the bar must not say so.
func (b *campaignBar) close() {
	if b.bar != nil {
		_ = b.bar.Exit()
		fmt.Fprintln(b.w)
	}
}
