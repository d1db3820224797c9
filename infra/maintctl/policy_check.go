package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// notAllowedError is `policy check`'s answer when the window is not allowed (exit status 2).
type notAllowedError struct{ rej *domain.Rejection }

func (e *notAllowedError) Error() string { return "not allowed: " + e.rej.Error() }

func (a *app) policyCheckCommand() *cobra.Command {
	var (
		start, end string
		minNotice  time.Duration
	)
	c := &cobra.Command{
		Use:   "check [flags] RESOURCE-ID",
		Short: "Check whether a window may be announced now, and find the next allowed one",
		Long: `Check a window against the policy in force for RESOURCE-ID (the most specific scope that
covers it), as the command function would judge a Pending announcing it now: whether it is
inside one occurrence of an allowed window, clear of the blackouts, and far enough ahead for
the notice in force (the larger of the policy's minNotice and --min-notice, the command
function's). Prints why not, and the next allowed window of the same length at or after both
the requested start and now plus the notice. Exit status 2 when the window is not allowed.`,
		Example: "  maintctl policy check " + exampleID + " --window-start 2026-11-21T21:00:00Z --window-end 2026-11-22T01:00:00Z",
		Args:    oneResourceID,
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now().UTC()
			w, err := parseWindow(start, end, now)
			if err != nil {
				return err
			}
			if w == nil {
				return fmt.Errorf("policy check needs --window-start and --window-end")
			}
			ctx, cl, done, err := a.entitySession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer done()
			p, ok, err := cl.PolicyFor(ctx, args[0])
			if err != nil {
				return err
			}
			res := checkWindow(args[0], *w, p, ok, minNotice, now)
			if a.json() {
				err = a.writeJSON(res)
			} else {
				err = a.printCheck(res)
			}
			if err == nil && !res.Allowed {
				err = &notAllowedError{rej: &domain.Rejection{Code: res.Code, Target: res.Target, Message: res.Message}}
			}
			return err
		},
	}
	c.Flags().StringVar(&start, "window-start", "", "start of the window (RFC 3339, or +DURATION from now)")
	c.Flags().StringVar(&end, "window-end", "", "end of the window (RFC 3339, or +DURATION from now)")
	c.Flags().DurationVar(&minNotice, "min-notice", 0, "the command function's --min-notice, when it has one")
	return c
}

// checkWindow judges w under p, the policy in force when ok (policy.Check).
func checkWindow(resourceID string, w domain.Window, p client.Policy, ok bool, minNotice time.Duration, now time.Time) policy.Verdict {
	if !ok {
		return policy.Check(resourceID, w, nil, 0, minNotice, now)
	}
	return policy.Check(resourceID, w, p.Policy, p.Revision.Seq, minNotice, now)
}

func (a *app) printCheck(res policy.Verdict) error {
	by := "no policy covers it"
	if res.Scope != "" {
		by = fmt.Sprintf("policy of %s (revision %d)", res.Scope, res.Revision)
	}
	verdict := "allowed"
	if !res.Allowed {
		verdict = fmt.Sprintf("not allowed: %s", rejectionText(domain.Event{Code: res.Code, Target: res.Target, Message: res.Message}))
	}
	next := "none within the policy's horizon"
	if res.Next != nil {
		next = fmtTime(res.Next.Start) + " → " + fmtTime(res.Next.End)
	}
	_, err := fmt.Fprintf(a.stdout, "window %s → %s for %s\nin force: %s; notice %s\n%s\nnext allowed window of %s: %s\n",
		fmtTime(res.Window.Start), fmtTime(res.Window.End), res.ResourceID, by, res.Notice, verdict, domain.FormatDuration(res.Window.End.Sub(res.Window.Start)), next)
	return err
}
