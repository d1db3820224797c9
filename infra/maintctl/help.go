package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	ui "maintsignals/infra/cli"
	"maintsignals/shared/domain"
)

// usageTemplate is every command's help after its description: the global flags are left to
// `maintctl options`, as kubectl does, so that a verb's help shows the verb's own flags.
const usageTemplate = `Usage:{{if and .Runnable .HasParent}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Commands:{{range $cmds}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) .IsAvailableCommand)}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasParent}}{{if .HasAvailableLocalFlags}}

Flags:
{{wrappedFlags .LocalFlags | trimTrailingWhitespaces}}{{end}}{{end}}

Use "{{.Root.Name}} options" for the flags every command takes (server, context, credentials, output).{{if .HasAvailableSubCommands}}
Use "{{.CommandPath}} COMMAND --help" for more about a command.{{end}}
`

// finish sets what the whole tree shares, once every command is added: the help (its
// template, the help command, completion shown among the other commands) and durations in days
// on every flag.
func (a *app) finish(root *cobra.Command) {
	addTemplateFuncs.Do(func() {
		// cobra keeps template functions in a global: added once. Flags wrap at helpWidth.
		cobra.AddTemplateFunc("wrappedFlags", func(fs *pflag.FlagSet) string { return fs.FlagUsagesWrapped(helpWidth) })
	})
	root.SetUsageTemplate(usageTemplate)
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetCompletionCommandGroupID("other")
	root.SetHelpCommand(a.helpCommand(root))
	root.SetHelpCommandGroupID("other")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// Examples name the entity once, so that their lines fit a terminal.
		if strings.Contains(c.Example, exampleID) {
			c.Example = "  ID=" + exampleID + "\n" + strings.ReplaceAll(c.Example, exampleID, "$ID")
		}
		ui.UseDays(c.Flags())
		ui.UseDays(c.PersistentFlags())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

var addTemplateFuncs sync.Once

// helpWidth is where the help wraps flag descriptions: inside a terminal of 120 columns, and
// of 100 for the descriptions' own lines.
const helpWidth = 100

// helpCommand is `maintctl help [COMMAND]...`: an unknown topic is an error (exit 1), with the
// commands it may be a typo of.
func (a *app) helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]...",
		Short: "Help about any command",
		// Not listed, so that the root help fits a screen; the footer and every command's
		// --help lead to it.
		Hidden: true,
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			target, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, c := range target.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name()+"\t"+c.Short)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			target := root
			for _, word := range args {
				next := subcommand(target, word)
				if next == nil {
					return fmt.Errorf("unknown help topic %q%s (see `%s help`)", strings.Join(args, " "), didYouMean(target, word), root.Name())
				}
				target = next
			}
			return target.Help()
		},
	}
}

// subcommand is the subcommand of c called (or aliased) word, nil when there is none.
func subcommand(c *cobra.Command, word string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == word || sub.HasAlias(word) {
			return sub
		}
	}
	return nil
}

const optionsLong = `The flags below go with any command, before or after its words. Each has an environment
variable, the one the nats CLI reads; a flag given overrides its variable.

Connecting: --server (or $NATS_URL) names the server, a comma-separated list for a cluster.
A NATS CLI context (--context NAME or $NATS_CONTEXT, else the one ` + "`nats context select`" + ` chose)
supplies the server, credentials, TLS files and inbox prefix that neither a flag nor a
variable gives: ~/.config/nats/context/NAME.json, as ` + "`nats context save`" + ` writes it.
On a secured NATS: --nkey FILE (a user nkey seed) or --creds FILE authenticate; --tlsca FILE
trusts the server's certificate; --tlscert and --tlskey present a client certificate (mutual
TLS); with the users of infra/nats (and ` + "`maintctl up --users`" + `) also --inbox-prefix, your role's
(e.g. _INBOX_admin). A denied command fails at once with "permission denied: ...".

Signing commands is separate from NATS authentication: --sign-key FILE signs each command
with that nkey seed (see ` + "`maintctl up --signers`" + `); an updater that does both passes the same
seed file to --nkey and --sign-key.

Output: tables for people fit the terminal (long cells are cut with "…" there, never when the
output goes to a pipe or a file); -o wide adds columns and cuts nothing; -o name prints the
IDs alone, one a line, for xargs; -o json is for scripts (JSON lines for watch).
Durations take d (days) and w (weeks) as well as h, m, s (14d, 2w, 1d12h); times are RFC
3339, a date alone (2026-12-14: midnight UTC), or an offset from now (+2h, +14d).`

// optionsCommand is `maintctl options`: the global flags, shown once here rather than in every
// command's help.
func (a *app) optionsCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "The flags every command takes: server, context, credentials, output",
		Long:  optionsLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nGlobal flags:\n%s", optionsLong, root.PersistentFlags().FlagUsagesWrapped(helpWidth))
			return nil
		},
	}
}

// completeWords completes one of words (no files).
func completeWords[T ~string](words ...T) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(words))
		for i, w := range words {
			out[i] = string(w)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFlag registers the completion of a flag of c (its own or persistent).
func (a *app) completeFlag(c *cobra.Command, flag string, fn cobra.CompletionFunc) {
	if err := c.RegisterFlagCompletionFunc(flag, fn); err != nil {
		panic(err) // a flag that does not exist: a programming error, caught by every test
	}
}

// completeTimeout bounds the completion of resource IDs from the bucket: a shell waits for it.
const completeTimeout = 2 * time.Second

// completeIDs completes a RESOURCE-ID from the tracked entities (at most max, which are
// enough for a prefix to narrow); with no server within completeTimeout, nothing.
func (a *app) completeIDs(max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// Completion prints nothing of its own: a shell shows stderr in the command line.
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		cl, err := a.connect(ctx, completeTimeout/2)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer cl.Close()
		ids, _ := cl.CompleteIDs(ctx, toComplete, 1000)
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeStates completes a state: its name, as the flags accept it.
var completeStates = completeWords(domain.States...)
