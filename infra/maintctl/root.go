package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"maintsignals/shared/client"
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
	var oe *client.OutcomeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &oe):
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

	server    string
	output    string
	logFormat string
	logLevel  string
	nkey      string // seed file signing commands

	log *slog.Logger
}

const (
	outTable = "table"
	outJSON  = "json"
)

const rootLong = `maintctl runs and operates maintenance signals: the per-entity maintenance state
(None, Pending, Planned, Unplanned, CustomerActionNeeded) that admin commands set through NATS
JetStream and that the emitter re-exports as OpenTelemetry metrics every tick.

Run the whole stack on this machine with ` + "`maintctl up`" + `, then use the admin verbs
against it. Every verb that talks to NATS uses --server (default $NATS_URL, else
nats://127.0.0.1:4222).

Exit status: 0 on success; 2 when a command was rejected or dead-lettered; 3 when no outcome
came in time (the command is stored and takes effect once a command function runs); 1 for
any other error.`

const rootExample = `  # the whole stack on this machine (NATS on 127.0.0.1:4222, data in ./maintsignals-data)
  maintctl up

  # in another terminal: announce maintenance, run it, report success
  ID=/subscriptions/0b1f/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1
  maintctl pending --reason "planned upgrade" --window-start +1h --window-end +3h $ID
  maintctl start --task OperatorUpdate $ID
  maintctl succeeded $ID
  maintctl get $ID
  maintctl history $ID
  maintctl list --state pending -o json

  # commands that could not be handled, and sending them through again
  maintctl dlq list
  maintctl dlq replay --all

  # a local 3-node JetStream cluster (replicas 3); export the NATS_URL list it prints
  maintctl up --nodes 3 --data ./maint-cluster`

func init() {
	// Commands are listed in the order they are added (the admin verbs in workflow order).
	cobra.EnableCommandSorting = false
}

// run is maintctl with its arguments (without the program name), environment and outputs.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if env == nil {
		env = func(string) string { return "" }
	}
	a := &app{env: env, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		err = fmt.Errorf("%w (see `maintctl --help`)", err)
	}
	return err
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "maintctl",
		Short:         "Run and operate maintenance signals on NATS JetStream",
		Long:          rootLong,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup()
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath())
	})

	server := a.env("NATS_URL")
	if server == "" {
		server = client.DefaultServer
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", server, "NATS server URL, or a comma-separated list for a cluster ($NATS_URL)")
	pf.StringVarP(&a.output, "output", "o", outTable, "output format: table (for people) or json (for scripts)")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&a.nkey, "nkey", a.env("MAINT_NKEY"), "file with the user nkey seed (SU…) that signs commands ($MAINT_NKEY)")

	root.AddGroup(
		&cobra.Group{ID: "admin", Title: "Admin commands (wait for the outcome):"},
		&cobra.Group{ID: "read", Title: "Reading state and history:"},
		&cobra.Group{ID: "dlq", Title: "Dead letters:"},
		&cobra.Group{ID: "run", Title: "Running the stack:"},
	)
	for _, c := range a.commandVerbs() {
		c.GroupID = "admin"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.getCommand(), a.listCommand(), a.historyCommand(), a.watchCommand(), a.keyCommand()} {
		c.GroupID = "read"
		root.AddCommand(c)
	}
	dlqCmd := a.dlqCommand()
	dlqCmd.GroupID = "dlq"
	root.AddCommand(dlqCmd)
	for _, c := range []*cobra.Command{a.upCommand(), a.functionCommand(), a.provisionCommand()} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	return root
}

// setup validates the global flags and builds the logger.
func (a *app) setup() error {
	switch a.output {
	case outTable, outJSON:
	default:
		return fmt.Errorf("--output %q: use table or json", a.output)
	}
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
	return nil
}

// connect connects to --server, with advice when it cannot.
func (a *app) connect(ctx context.Context, timeout time.Duration) (*client.Client, error) {
	if timeout <= 0 || timeout > 5*time.Second {
		timeout = 5 * time.Second
	}
	var signer nkeys.KeyPair
	if a.nkey != "" {
		kp, err := signing.LoadSeed(a.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey: %w", err)
		}
		signer = kp
	}
	c, err := client.Connect(ctx, a.server, client.Options{Name: "maintctl", Timeout: timeout, Logger: a.log, Signer: signer})
	if err != nil {
		return nil, fmt.Errorf("%w: is `maintctl up` running? set --server or NATS_URL", err)
	}
	return c, nil
}

func (a *app) json() bool { return a.output == outJSON }

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
