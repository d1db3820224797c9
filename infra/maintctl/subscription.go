package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
)

const exampleSubscriptionScope = "/subscriptions/0b1f/resourceGroups/rg-1"

func (a *app) subscriptionCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "subscription",
		Short: "Self-service webhook subscriptions: create, list, delete",
		Long: `A webhook subscription delivers the outcome events and notices of the entities of its scope (a
subscription, a resource group or one resource) to an HTTPS endpoint, as signed CloudEvents
(Standard Webhooks), in order per entity, from its creation on. Customers create their own,
within their scopes; admins any. Subscriptions are created and deleted by subscription commands,
which the subscriptions function applies; the webhook function starts delivering within seconds.

The signing secret is made by maintctl (or read from --secret-file), sent inside the signed
command, and shown once, by create: no list, outcome or log shows it again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(a.subscriptionCreateCommand(), a.subscriptionListCommand(), a.subscriptionDeleteCommand())
	return c
}

// subscriptionFilters are the filters of subscription create.
type subscriptionFilters struct {
	types, states, categories []string
	inWindow, actionRequired  string
}

func (f subscriptionFilters) filters() (subscription.Filters, error) {
	out := subscription.Filters{Types: f.types, Categories: f.categories}
	for _, s := range f.states {
		out.States = append(out.States, domain.State(s))
	}
	for _, b := range []struct {
		flag, value string
		dst         **bool
	}{{"in-window", f.inWindow, &out.InWindow}, {"action-required", f.actionRequired, &out.ActionRequired}} {
		if b.value == "" {
			continue
		}
		v, err := strconv.ParseBool(b.value)
		if err != nil {
			return out, fmt.Errorf("--%s %q: true or false", b.flag, b.value)
		}
		*b.dst = &v
	}
	return out, out.CheckFilters()
}

func (a *app) subscriptionCreateCommand() *cobra.Command {
	var (
		f                       sendFlags
		filters                 subscriptionFilters
		endpoint, scope, secret string
	)
	c := &cobra.Command{
		Use:   "create [flags] NAME",
		Short: "Create a webhook subscription (a subscription command); its secret is shown once",
		Long: `Create the webhook subscription NAME (1-64 of [A-Za-z0-9_-]) of --scope, delivering to --url
(https). Filters, each optional: --types (ce-type values), --states (resulting states),
--categories (planned, unplanned), --in-window and --action-required (true or false).

maintctl makes the signing secret (whsec_ and 32 random bytes, Standard Webhooks) and prints it
once: give it to the endpoint, which verifies every delivery with it. --secret-file gives one
instead (never printed). A name is created once: to change a subscription, delete it and create
it again (a new secret; deliveries start again from the new creation).`,
		Example: "  maintctl subscription create crm --url https://hooks.example.com/maint --scope " + exampleSubscriptionScope + "\n" +
			"  maintctl subscription create pager --url https://pager.example.com/in --scope " + exampleSubscriptionScope + " \\\n" +
			"      --states CustomerActionNeeded --secret-file pager.secret",
		Args: oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			flt, err := filters.filters()
			if err != nil {
				return err
			}
			sec, generated, err := a.subscriptionSecret(secret)
			if err != nil {
				return err
			}
			c := subscription.Command{ID: f.id, Action: domain.SubscriptionCreate, Name: args[0], Scope: scope, URL: endpoint, Secret: sec, Actor: f.actor,
				Types: flt.Types, States: flt.States, Categories: flt.Categories, InWindow: flt.InWindow, ActionRequired: flt.ActionRequired}
			return a.sendSubscription(cmd.Context(), c, f, generated)
		},
	}
	fl := c.Flags()
	fl.StringVar(&endpoint, "url", "", "the endpoint, an https URL (required)")
	fl.StringVar(&scope, "scope", "", "the entities whose events and notices it receives: /subscriptions/<sub>, …/resourceGroups/<rg> or a resource ID (required)")
	fl.StringSliceVar(&filters.types, "types", nil, "ce-type values delivered, comma-separated (default: every type)")
	fl.StringSliceVar(&filters.states, "states", nil, "resulting states delivered, comma-separated, matched exactly (default: every state)")
	fl.StringSliceVar(&filters.categories, "categories", nil, "categories delivered: planned, unplanned (default: any)")
	fl.StringVar(&filters.inWindow, "in-window", "", "deliver only events whose inWindow is this (true or false)")
	fl.StringVar(&filters.actionRequired, "action-required", "", "deliver only events whose actionRequired is this (true or false)")
	fl.StringVar(&secret, "secret-file", "", "a file holding the signing secret (whsec_…) instead of a new one")
	_ = c.MarkFlagRequired("url")
	_ = c.MarkFlagRequired("scope")
	a.addSendFlags(c, &f, "subscription", "the subscription")
	return c
}

// subscriptionSecret is the signing secret of a new subscription: read from file, or made
// (generated true).
func (a *app) subscriptionSecret(file string) (secret string, generated bool, err error) {
	if file == "" {
		s, err := subscription.NewSecret()
		return s, true, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false, fmt.Errorf("--secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if _, err := subscription.DecodeSecret(s); err != nil {
		return "", false, fmt.Errorf("--secret-file %s: %w", file, err)
	}
	return s, false, nil
}

func (a *app) subscriptionDeleteCommand() *cobra.Command {
	var (
		f     sendFlags
		scope string
	)
	c := &cobra.Command{
		Use:   "delete [flags] NAME",
		Short: "Delete a webhook subscription (a subscription command)",
		Long: `Delete the webhook subscription NAME among those you may see: deliveries stop within seconds, and
its secret is dropped. When NAME is used in more than one of your scopes, --scope says which
(the subscription's scope as list shows it).`,
		Example: "  maintctl subscription delete crm\n  maintctl subscription delete crm --scope " + exampleSubscriptionScope,
		Args:    oneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			found, err := a.findSubscription(cmd.Context(), args[0], scope)
			if err != nil {
				return err
			}
			c := subscription.Command{ID: f.id, Action: domain.SubscriptionDelete, Name: args[0], Scope: found, Actor: f.actor}
			return a.sendSubscription(cmd.Context(), c, f, false)
		},
	}
	c.Flags().StringVar(&scope, "scope", "", "the subscription's scope, when NAME is used in more than one")
	a.addSendFlags(c, &f, "subscription", "the subscription")
	return c
}

// findSubscription is the scope of the subscription name among those this user may see, of
// scope when given; with scope and nothing seen, scope itself (the function answers).
func (a *app) findSubscription(parent context.Context, name, scope string) (string, error) {
	var want string
	if scope != "" {
		sc, err := subscription.ParseScope(scope)
		if err != nil {
			return "", fmt.Errorf("--scope: %w", err)
		}
		want = sc.Key
	}
	ctx, cl, done, err := a.session(parent, readTimeout)
	if err != nil {
		return "", err
	}
	defer done()
	subs, err := cl.Subscriptions(ctx)
	if err != nil {
		return "", err
	}
	var scopes []string
	for _, s := range subs {
		sc, err := subscription.ParseScope(s.Record.Scope)
		if s.Record.Name == name && err == nil && (want == "" || sc.Key == want) {
			scopes = append(scopes, s.Record.Scope)
		}
	}
	switch {
	case len(scopes) == 1:
		return scopes[0], nil
	case len(scopes) > 1:
		return "", fmt.Errorf("subscription %s is in %d scopes (%s): give --scope", name, len(scopes), strings.Join(scopes, ", "))
	case scope != "":
		return scope, nil
	}
	return "", fmt.Errorf("no subscription %s that you may see (`maintctl subscription list`)", name)
}

// oneName is the argument check of the subscription commands that take a name.
func oneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one NAME, got %d arguments (see `%s --help`)", cmd.Name(), len(args), cmd.CommandPath())
	}
	if !subscription.ValidName(args[0]) {
		return fmt.Errorf("NAME %q: 1-64 of [A-Za-z0-9_-]", args[0])
	}
	return nil
}

// subscriptionResultJSON is the JSON document of subscription create and delete; Secret only
// when create made it.
type subscriptionResultJSON struct {
	Command     subscription.Command     `json:"command"`
	Seq         uint64                   `json:"seq"`
	Republished bool                     `json:"republished,omitempty"`
	Outcome     domain.SubscriptionEvent `json:"outcome"`
	Secret      string                   `json:"secret,omitempty"`
}

// sendSubscription sends a subscription command, waits for its outcome and prints it, with the
// secret when it made it and the subscription may exist (applied, or no outcome in time).
func (a *app) sendSubscription(ctx context.Context, cmd subscription.Command, f sendFlags, generated bool) error {
	if cmd.ID == "" {
		cmd.ID = client.NewCommandID("maintctl-subscription")
	}
	res, err := sendAwaited(ctx, a, f, func(ctx context.Context, cl *client.Client) (*client.SubscriptionResult, error) {
		return cl.SendSubscription(ctx, cmd)
	})
	secret := ""
	if generated && (err == nil || errors.Is(err, client.ErrNoOutcome)) {
		secret = cmd.Secret
	}
	if res == nil || res.Event.Outcome == "" {
		if errors.Is(err, client.ErrNoOutcome) {
			a.printSecret(secret, "if the command takes effect, this is its secret")
		}
		return noOutcome(err, "subscriptions")
	}
	return a.printSubscriptionResult(res, secret, err)
}

func (a *app) printSubscriptionResult(res *client.SubscriptionResult, secret string, err error) error {
	shown := res.Command
	shown.Secret = ""
	if a.json() {
		if perr := a.writeJSON(subscriptionResultJSON{Command: shown, Seq: res.Seq, Republished: res.Republished, Outcome: res.Event, Secret: secret}); perr != nil {
			return perr
		}
		return err
	}
	ev := res.Event
	line := fmt.Sprintf("%s %s of subscription %s (scope %s)", ev.Outcome, ev.Action, ev.Name, ev.Scope) +
		outcomeDetail(ev.Outcome, ev.Code, ev.Target, ev.Message)
	if _, perr := fmt.Fprintf(a.stdout, "%s\nsubscription command %s, %s sequence %d\n", line, ev.CommandID, domain.SubscriptionsStream, res.Seq); perr != nil {
		return perr
	}
	if ev.Delivery != "" {
		fmt.Fprintf(a.stdout, "delivery    %s (its dead letters: maintctl dlq list --subscription %s)\n", ev.Delivery, ev.Delivery)
	}
	if ev.Outcome == domain.OutcomeApplied {
		a.printSecret(secret, "keep it now: it is never shown again; the endpoint verifies every delivery with it")
	}
	return err
}

// printSecret prints a secret maintctl made, once, with why; nothing when there is none.
func (a *app) printSecret(secret, why string) {
	if secret != "" {
		fmt.Fprintf(a.stdout, "secret      %s\n            (%s)\n", secret, why)
	}
}

// subscriptionJSON is a subscription as list shows it to scripts: never its secret, and its
// endpoint without the query (which may hold a token).
type subscriptionJSON struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	URL   string `json:"url"`
	subscription.Filters
	Delivery  string    `json:"delivery"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CommandID string    `json:"commandId"`
	Revision  uint64    `json:"revision"`
}

func toSubscriptionJSON(s subscription.Stored) subscriptionJSON {
	r := s.Record
	return subscriptionJSON{Name: r.Name, Scope: r.Scope, URL: withoutQuery(r.URL), Filters: r.Filters, Delivery: r.Delivery,
		CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, CommandID: r.CommandID, Revision: s.Rev}
}

// withoutQuery is an endpoint without its query and fragment ("?…" says there was one).
func withoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	more := u.RawQuery != "" || u.Fragment != ""
	u.RawQuery, u.Fragment, u.User = "", "", nil
	if more {
		return u.String() + "?…"
	}
	return u.String()
}

func (a *app) subscriptionListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the webhook subscriptions you may see (never their secrets)",
		Long: `List the self-service webhook subscriptions: every one for an admin, those of its own tenants for
a customer (as the server's permissions for the user say). No secret is ever shown, nor an
endpoint's query. -o wide adds the delivery name (of the dead letters) and the create command.`,
		Example: "  maintctl subscription list\n  maintctl subscription list -o json | jq -r '.[].name'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := a.session(cmd.Context(), readTimeout)
			if err != nil {
				return err
			}
			defer done()
			subs, err := cl.Subscriptions(ctx)
			if err != nil {
				return err
			}
			if a.json() {
				out := make([]subscriptionJSON, 0, len(subs))
				for _, s := range subs {
					out = append(out, toSubscriptionJSON(s))
				}
				return a.writeJSON(out)
			}
			return a.printSubscriptions(subs)
		},
	}
}

func (a *app) printSubscriptions(subs []subscription.Stored) error {
	if len(subs) == 0 && a.format != ui.Name {
		_, err := fmt.Fprintln(a.stdout, "no subscription")
		return err
	}
	t := ui.NewTable(ui.Column{Header: "NAME"}, ui.Column{Header: "SCOPE", Shrink: true}, ui.Column{Header: "URL", Shrink: true},
		ui.Column{Header: "TYPES", Shrink: true}, ui.Column{Header: "STATES"}, ui.Column{Header: "CREATED"}, ui.Column{Header: "BY"},
		ui.Column{Header: "DELIVERY", Wide: true}, ui.Column{Header: "COMMAND", Wide: true})
	for _, s := range subs {
		r := s.Record
		states := make([]string, len(r.States))
		for i, st := range r.States {
			states[i] = string(st)
		}
		t.Row(r.Name, r.Name, r.Scope, withoutQuery(r.URL), strings.Join(r.Types, ","), strings.Join(states, ","),
			fmtTime(r.CreatedAt), r.CreatedBy, r.Delivery, r.CommandID)
	}
	return a.printTable(t)
}
