package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/signing"
)

// Exit statuses of maintctl.
const (
	exitError    = 1 // anything else: bad usage, cannot connect, ...
	exitRejected = 2 // the command was rejected or dead-lettered
	exitNoResult = 3 // no outcome event in time
)

// exitCode maps an error returned by run to the process exit status.
func exitCode(err error) int {
	var (
		oe *client.OutcomeError
		ce *client.CampaignOutcomeError
		pe *client.PolicyOutcomeError
		se *client.SubscriptionOutcomeError
		ne *notAllowedError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &oe), errors.As(err, &ce), errors.As(err, &pe), errors.As(err, &se), errors.As(err, &ne):
		return exitRejected
	case errors.Is(err, client.ErrNoOutcome):
		return exitNoResult
	default:
		return exitError
	}
}

// app holds what every subcommand shares: the environment, the outputs and the global flags.
type app struct {
	env            func(string) string
	stdout, stderr io.Writer

	server      string
	natsContext string           // --context: a NATS CLI context
	nats        natsconn.Options // credentials, TLS and inbox prefix (--creds, --nkey, --tlsca, ...)
	output      string
	format      ui.Format
	noHeaders   bool
	logFormat   string
	logLevel    string
	signKey     string        // seed file signing commands (--sign-key)
	scopes      []string      // the scopes a confined customer reads (--scope)
	stuckAfter  time.Duration // --stuck-after of get and list (0: the default)

	log *slog.Logger
}

const rootLong = `maintctl sets and reads the maintenance state of clusters (None, Pending, Planned, Unplanned,
CustomerActionNeeded) through NATS JetStream, and runs the functions that export it to the health
system every minute. Try it: ` + "`maintctl up`" + `, then in another terminal ` + "`maintctl pending ID`" + `, ` + "`maintctl list`" + `.
Exit status: 0 done, 2 rejected/dead-lettered/not allowed (policy check), 3 no outcome in time (stored), 1 other errors.`

var unsortedCommands sync.Once

// run is maintctl with its arguments (without the program name), environment and outputs.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	// Commands are listed in the order they are added (the admin verbs in workflow order).
	// cobra keeps this in a global: set it once, before any command is built.
	unsortedCommands.Do(func() { cobra.EnableCommandSorting = false })
	if env == nil {
		env = func(string) string { return "" }
	}
	a := &app{env: env, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return explainPermission(root.ExecuteContext(ctx))
}

// errUnknownCommand is wrapped when a word stands where a subcommand belongs.
var errUnknownCommand = errors.New("unknown command")

// noArgs is the Args of a command that takes no words of its own (the root, a group of
// subcommands, a verb without operands): a word is an unknown command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownCommand(cmd, args[0])
}

func unknownCommand(cmd *cobra.Command, word string) error {
	return fmt.Errorf("%w %q for %q%s (see `%s --help`)", errUnknownCommand, word, cmd.CommandPath(), didYouMean(cmd, word), cmd.CommandPath())
}

// didYouMean suggests the subcommands of cmd that word may be a typo of.
func didYouMean(cmd *cobra.Command, word string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		return "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return ""
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "maintctl",
		Short:         "Run and operate maintenance signals on NATS JetStream",
		Long:          rootLong,
		Version:       buildVersion().line(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup()
		},
		// Words at the top that name no command are refused here, not by cobra's text.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// At the top, a flag of a mistyped command fails before the word is looked at: the
		// word is what is wrong.
		if !cmd.HasParent() && cmd.Flags().NArg() > 0 {
			return unknownCommand(cmd, cmd.Flags().Arg(0))
		}
		return fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath())
	})
	a.globalFlags(root)
	root.AddGroup(
		&cobra.Group{ID: "admin", Title: "Announce and run maintenance (each waits for its outcome):"},
		&cobra.Group{ID: "read", Title: "Read the state, the history and the notices:"},
		&cobra.Group{ID: "run", Title: "Run the stack and its dead letters:"},
		&cobra.Group{ID: "other", Title: "Other:"},
	)
	for _, c := range a.commandVerbs() {
		c.GroupID = "admin"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.getCommand(), a.listCommand(), a.historyCommand(), a.noticesCommand(), a.watchCommand(), a.keyCommand(), a.regionsCommand()} {
		c.GroupID = "read"
		root.AddCommand(c)
	}
	campaignCmd := a.campaignCommand()
	campaignCmd.GroupID = "admin"
	root.AddCommand(campaignCmd)
	policyCmd := a.policyCommand()
	policyCmd.GroupID = "admin"
	root.AddCommand(policyCmd)
	subscriptionCmd := a.subscriptionCommand()
	subscriptionCmd.GroupID = "admin"
	root.AddCommand(subscriptionCmd)
	for _, c := range []*cobra.Command{a.upCommand(), a.hubCommand(), a.functionCommand(), a.provisionCommand(), a.dlqCommand()} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.optionsCommand(root), a.versionCommand()} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	a.finish(root)
	return root
}

// globalFlags puts the flags every command takes on root (`maintctl options` lists them).
func (a *app) globalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", a.env("NATS_URL"), "NATS server URL, or a comma-separated list for a cluster ($NATS_URL; else the NATS context's; else "+client.DefaultServer+")")
	pf.StringVar(&a.natsContext, "context", "", "the NATS CLI context `NAME` to connect with ($"+natsconn.EnvContext+"; default: the one the nats CLI selected, if any): its server, credentials, TLS and inbox prefix, under the flags and variables")
	pf.StringVarP(&a.output, "output", "o", string(ui.Table), "output format: table (for people; fits the terminal), wide (more columns), name (IDs, one a line) or json (for scripts)")
	pf.BoolVar(&a.noHeaders, "no-headers", false, "print tables without their header line")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&a.signKey, "sign-key", a.env(envSignKey), "file with the user nkey seed (SU…) that signs commands ($"+envSignKey+"); NATS authentication is --nkey")
	pf.StringSliceVar(&a.scopes, "scope", splitList(a.env("MAINT_SCOPES")), "as a customer confined to tenants: the `PREFIX` of a subscription or resource group you may read (repeat, or comma-separated; $MAINT_SCOPES); list, history, notices and watch read only these")
	a.nats = natsconn.FromEnv(a.env)
	a.nats.Servers = "" // --server has it
	a.nats.Flags(pf)
	pf.Lookup("nkey").Usage = "file with the user nkey seed (SU…) that authenticates to NATS ($" + natsconn.EnvNkey + "); signing commands is --sign-key"
	a.completeFlag(root, "output", completeWords(ui.Formats...))
	a.completeFlag(root, "log-format", completeWords("text", "json"))
	a.completeFlag(root, "log-level", completeWords("debug", "info", "warn", "error"))
	a.completeFlag(root, "context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return natsconn.KnownContexts(a.env), cobra.ShellCompDirectiveNoFileComp
	})
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Signing key variables: MAINT_SIGN_KEY, and the name it had when --nkey still meant signing.
const (
	envSignKey    = "MAINT_SIGN_KEY"
	envOldSignKey = "MAINT_NKEY"
)

// setup validates the global flags and builds the logger.
func (a *app) setup() error {
	f, err := ui.ParseFormat(a.output)
	if err != nil {
		return err
	}
	a.format = f
	var level slog.Level
	switch strings.ToLower(a.logLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info", "":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return fmt.Errorf("--log-format %q: use text or json", a.logFormat)
	}
	if a.env(envOldSignKey) != "" && a.env(envSignKey) == "" {
		a.log.Warn("$" + envOldSignKey + " is no longer read: the seed that signs commands is --sign-key or $" + envSignKey +
			" (--nkey and $" + natsconn.EnvNkey + " authenticate to NATS)")
	}
	return nil
}

// natsOptions are the connection options of the global flags and variables, for a connection
// named name, with what they leave unset taken from the NATS CLI context (--context,
// $NATS_CONTEXT or the selected one).
func (a *app) natsOptions(name string, timeout time.Duration) (natsconn.Options, error) {
	o := a.nats
	o.Servers = a.server
	nc, err := natsconn.LoadContext(a.natsContext, a.env)
	if err != nil {
		return o, err
	}
	if nc != nil {
		if err := nc.Fill(&o, a.env); err != nil {
			return o, err
		}
		a.log.Debug("connecting with a NATS context", "context", nc.Name, "file", nc.Path)
	}
	o.Servers = natsconn.NormalizeServers(o.Servers)
	a.server = o.Servers // what messages name
	o.Name, o.Timeout, o.Logger = name, timeout, a.log
	return o, nil
}

// entitySession checks a RESOURCE-ID argument, then opens a read session.
func (a *app) entitySession(parent context.Context, resourceID string) (context.Context, *client.Client, func(), error) {
	if _, err := domain.Key(resourceID); err != nil {
		return nil, nil, nil, fmt.Errorf("RESOURCE-ID %q: %w", resourceID, err)
	}
	return a.session(parent, readTimeout)
}

// session connects to --server for one command bounded by timeout; done closes both.
func (a *app) session(parent context.Context, timeout time.Duration) (context.Context, *client.Client, func(), error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	cl, err := a.connect(ctx, 0)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

// connect connects to --server with the credentials and TLS of the flags, with advice when it
// cannot.
func (a *app) connect(ctx context.Context, timeout time.Duration) (*client.Client, error) {
	if timeout <= 0 || timeout > 5*time.Second {
		timeout = 5 * time.Second
	}
	var signer nkeys.KeyPair
	if a.signKey != "" {
		kp, err := signing.LoadSeed(a.signKey)
		if err != nil {
			return nil, fmt.Errorf("--sign-key: %w", err)
		}
		signer = kp
	}
	o, err := a.natsOptions("maintctl", timeout)
	if err != nil {
		return nil, err
	}
	conn, err := natsconn.Connect(ctx, o)
	if err != nil {
		return nil, connectAdvice(err, "is `maintctl up` running? set --server, NATS_URL or --context")
	}
	scopes, err := natsconf.ParseScopes(a.scopes)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("--scope: %w", err)
	}
	return client.FromConn(conn, client.Options{Logger: a.log, Signer: signer, Scopes: scopes}), nil
}

// connectAdvice says what to do about a failed connection; unreachable is the advice when
// nothing else fits.
func connectAdvice(err error, unreachable string) error {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		certErr   *tls.CertificateVerificationError
	)
	// Only the TLS cases at the end read the text: an alert the server sends comes as
	// crypto/tls's unexported alert type, and its text alone says "certificate required".
	msg := err.Error()
	switch {
	case errors.Is(err, natsconn.ErrInvalidOptions), errors.Is(err, natsconn.ErrContext):
		return err
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return fmt.Errorf("%w: the server refused these credentials: give a user it knows with --nkey FILE or --creds FILE ($NATS_NKEY, $NATS_CREDS)", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: the server's TLS certificate is not for this address: connect with a name or address it lists", err)
	case errors.As(err, &unknownCA), errors.As(err, &certErr):
		return fmt.Errorf("%w: the server's TLS certificate is not trusted: give the CA that signed it with --tlsca FILE ($NATS_CA)", err)
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"):
		return fmt.Errorf("%w: the server requires a client certificate (mutual TLS): give it with --tlscert FILE --tlskey FILE ($NATS_CERT, $NATS_KEY)", err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("%w: the server does not offer TLS: leave out --tlsca/--tlscert, or connect to the server that does", err)
	case strings.Contains(msg, "TLS handshake"), strings.Contains(msg, "tls:"):
		return fmt.Errorf("%w: TLS failed: check --tlsca (and --tlscert/--tlskey for mutual TLS), and that --server is the server's tls:// address", err)
	}
	return fmt.Errorf("%w: %s", err, unreachable)
}

// explainPermission rewrites a permission error for people: which subject the NATS user may
// not use, and what to do about it. Other errors are returned as they are.
func explainPermission(err error) error {
	var (
		pe      *natsconn.PermissionError
		already *permissionError
	)
	if !errors.As(err, &pe) || errors.As(err, &already) {
		return err
	}
	var advice string
	switch {
	case pe.Op == "subscribe" && strings.HasPrefix(pe.Subject, "_INBOX"):
		advice = "the replies to this user go elsewhere: set --inbox-prefix ($NATS_INBOX_PREFIX) to your role's, e.g. _INBOX_admin"
	case pe.Op == "publish" && strings.HasPrefix(pe.Subject, domain.CommandPrefix):
		advice = "sending commands takes a user of the admin role, or updater for outcomes, or customer for reschedules: connect as one with --nkey FILE or --creds FILE"
	case pe.Op == "publish" && strings.HasPrefix(pe.Subject, domain.PolicyPrefix):
		advice = "sending policy commands takes a user of the admin or customer role: connect as one with --nkey FILE or --creds FILE"
	case errors.Is(err, client.ErrNotPermitted):
		advice = "the entity is not in your tenants' scopes"
	default:
		advice = "connect as a user whose role allows it with --nkey FILE or --creds FILE"
	}
	return withAdvice(err, advice)
}

// withAdvice makes a permission error (err wraps a *natsconn.PermissionError) print as
// explainPermission does, with advice; other errors are returned as they are.
func withAdvice(err error, advice string) error {
	var pe *natsconn.PermissionError
	if !errors.As(err, &pe) {
		return err
	}
	return &permissionError{err: err, pe: pe, advice: advice}
}

// permissionError is a permission error as maintctl prints it; errors.Is and errors.As still
// find what it wraps.
type permissionError struct {
	err    error
	pe     *natsconn.PermissionError
	advice string
}

func (e *permissionError) Error() string {
	verb := "publish to"
	if e.pe.Op == "subscribe" {
		verb = "subscribe to"
	}
	msg := fmt.Sprintf("permission denied: your NATS user may not %s %s (%s)", verb, e.pe.Subject, e.advice)
	if errors.Is(e.err, client.ErrNotPermitted) {
		msg = "not permitted: " + msg
	}
	return msg
}

func (e *permissionError) Unwrap() error { return e.err }

func (a *app) json() bool { return a.format == ui.JSON }

// writeJSON writes one indented JSON document.
func (a *app) writeJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// oneResourceID is the argument check of the commands that take one resource ID.
func oneResourceID(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("%s needs a RESOURCE-ID (see `%s --help`)", cmd.Name(), cmd.CommandPath())
	default:
		return fmt.Errorf("%s takes one RESOURCE-ID, got %d arguments: %q (quote an ID that contains spaces; see `%s --help`)", cmd.Name(), len(args), args, cmd.CommandPath())
	}
}

// writeJSONLine writes one compact JSON document on a line (JSON lines, for streams).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
