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

// checkJSON is `policy check`'s answer for scripts.
type checkJSON struct {
	ResourceID string         `json:"resourceId"`
	Window     domain.Window  `json:"window"`
	Scope      string         `json:"scope,omitempty"` // of the policy in force; "" when none
	Revision   uint64         `json:"revision,omitempty"`
	Notice     string         `json:"notice"` // the notice in force
	Allowed    bool           `json:"allowed"`
	Code       domain.Code    `json:"code,omitempty"`
	Target     string         `json:"target,omitempty"`
	Message    string         `json:"message,omitempty"`
	Next       *domain.Window `json:"next,omitempty"` // the next allowed window of that length
}

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

// checkWindow judges w as a Pending announcing it at now would be (policy.Enforce).
func checkWindow(resourceID string, w domain.Window, p client.Policy, ok bool, minNotice time.Duration, now time.Time) checkJSON {
	var pol *policy.Policy
	res := checkJSON{ResourceID: resourceID, Window: w}
	if ok {
		pol, res.Scope, res.Revision = p.Policy, p.Policy.Document().Scope, p.Revision.Seq
	}
	notice := policy.NoticeInForce(pol, minNotice)
	res.Notice = domain.FormatDuration(notice)
	dec := policy.Enforce(domain.Command{ID: "check", ResourceID: resourceID, Task: domain.TaskPending, Window: &w}, now, pol, minNotice)
	res.Allowed = dec.Rejection == nil
	if !res.Allowed {
		res.Code, res.Target, res.Message = dec.Rejection.Code, dec.Rejection.Target, dec.Rejection.Message
	}
	length, notBefore := w.End.Sub(w.Start), now.Add(notice)
	if w.Start.After(notBefore) {
		notBefore = w.Start
	}
	next, found := notBefore, true
	if pol != nil {
		next, found = pol.NextAllowed(length, notBefore)
	}
	if found {
		res.Next = &domain.Window{Start: next.UTC(), End: next.Add(length).UTC()}
	}
	return res
}

func (a *app) printCheck(res checkJSON) error {
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
