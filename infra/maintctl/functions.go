package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/functions/notices"
	"maintsignals/functions/webhook"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/shared/telemetry"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// The functions maintctl runs, their flags, and running them: `up` runs every one, `function
// NAME` runs one. Adding a function is one entry in functions.

// functionEnv is what a function gets from the process that runs it.
type functionEnv struct {
	js   jetstream.JetStream
	tel  *telemetry.Telemetry
	a    *app
	tick time.Duration // the schedule interval, when known (up); 0 otherwise
	emit emitFlags
	up   bool // run by `maintctl up`, where the webhook function may have no subscription
}

// emitFlags configure the functions (the name stays for the emitter's flags, which came first).
type emitFlags struct {
	retention  time.Duration
	pucm       bool
	stuckAfter time.Duration
	remind     string
	minNotice  time.Duration

	signers           string
	maxCommandAge     time.Duration
	requireSignatures bool
	entityRate        float64
	entityBurst       int

	subscriptions string
	fromStart     bool

	web webFlags
}

func addEmitFlags(c *cobra.Command, f *emitFlags) {
	addWebFlags(c, &f.web)
	c.Flags().DurationVar(&f.retention, "retention", emitter.DefaultRetention, "emitter: how long an entity in None keeps being emitted")
	c.Flags().BoolVar(&f.pucm, "pucm", false, "emitter: also emit the ARO-RP compatible cluster.maintenance.pucm metric")
	c.Flags().DurationVar(&f.stuckAfter, "stuck-after", domain.DefaultStuckAfter, "emitter and notices: an update running longer than this is stuck (cluster.maintenance.stuck, the stuck notice)")
	c.Flags().StringVar(&f.remind, "remind", notices.FormatLadder(notices.DefaultRemind), `notices: reminder lead times before a window starts, comma-separated ("" for none)`)
	c.Flags().DurationVar(&f.minNotice, "min-notice", 0, "command: refuse a Pending whose window starts sooner than this after the command is handled, unless forced (0: no minimum)")
	c.Flags().StringVar(&f.signers, "signers", "", `command: JSON file of the keys allowed to sign commands: [{"name":"alice","publicKeys":["U…"],"roles":["admin"]}] (roles: admin, updater); read again when it changes`)
	c.Flags().BoolVar(&f.requireSignatures, "require-signatures", false, "command: refuse unsigned commands (Unauthorized); needs --signers")
	c.Flags().DurationVar(&f.maxCommandAge, "max-command-age", command.DefaultMaxCommandAge, "command: a signed command issued longer before the stream stored it is refused (Unauthorized, expired)")
	c.Flags().Float64Var(&f.entityRate, "entity-rate", command.DefaultEntityRate, "command: changes per second admitted per entity, by the commands' stored times (a flood beyond is refused); negative: no limit")
	c.Flags().IntVar(&f.entityBurst, "entity-burst", command.DefaultEntityBurst, "command: burst of changes admitted per entity")
	c.Flags().StringVar(&f.subscriptions, "subscriptions", "", `webhook: JSON file of the subscriptions: [{"name","url","secret":"whsec_…","types":[…],"states":[…],"resourcePrefix","caFile"}]`)
	c.Flags().BoolVar(&f.fromStart, "from-start", false, "webhook: a subscription seen for the first time starts at the oldest event the webhook feed keeps, since webhooks were turned on (default: at events stored after it is created); one with progress keeps it")
}

// authority loads the signing policy of --signers / --require-signatures (nil: none) and
// follows the signers file until ctx ends, so that keys rotate without a restart.
func (f emitFlags) authority(ctx context.Context, log *slog.Logger) (command.Authority, error) {
	switch {
	case f.signers == "" && f.requireSignatures:
		return nil, errors.New("--require-signatures needs --signers FILE")
	case f.signers == "":
		return nil, nil
	}
	return signing.Watch(ctx, f.signers, f.requireSignatures, signing.DefaultWatchEvery, log)
}

// functionSpec is one function maintctl can run.
type functionSpec struct {
	name, about string
	// run serves until ctx is cancelled, then drains and returns nil. nil run: not available
	// in this build.
	run func(ctx context.Context, fe functionEnv) error
}

// functions lists every function, in the order `up` starts them. Adding a function is one
// entry here.
var functions = []functionSpec{
	{
		name:  "command",
		about: "applies admin and outcome commands (every partition of MAINT_COMMANDS)",
		run: func(ctx context.Context, fe functionEnv) error {
			auth, err := fe.emit.authority(ctx, fe.a.log)
			if err != nil {
				return err
			}
			return command.Run(ctx, fe.js, command.Config{
				Log:           fe.a.log,
				Meters:        fe.tel.MeterProvider(),
				Auth:          auth,
				MaxCommandAge: fe.emit.maxCommandAge,
				EntityRate:    fe.emit.entityRate,
				EntityBurst:   fe.emit.entityBurst,
				MinNotice:     fe.emit.minNotice,
			})
		},
	},
	{
		name:  "emitter",
		about: "re-exports every tracked state as OTLP metrics on each tick",
		run: func(ctx context.Context, fe functionEnv) error {
			return emitter.Run(ctx, fe.js, fe.tel, emitter.Config{
				Tick:       fe.tick,
				Retention:  fe.emit.retention,
				PUCM:       fe.emit.pucm,
				StuckAfter: fe.emit.stuckAfter,
				Logger:     fe.a.log,
			})
		},
	},
	{
		name:  "notices",
		about: "publishes lifecycle notices (reminders, due, overdue, stuck) on each tick",
		run: func(ctx context.Context, fe functionEnv) error {
			ladder, err := notices.ParseLadder(fe.emit.remind)
			if err != nil {
				return fmt.Errorf("--remind: %w", err)
			}
			err = notices.Run(ctx, fe.js, notices.Config{
				Remind:     ladder,
				StuckAfter: fe.emit.stuckAfter,
				Tick:       fe.tick,
				Logger:     fe.a.log,
				Meters:     fe.tel.MeterProvider(),
			})
			if errors.Is(err, notices.ErrInvalidConfig) {
				return fmt.Errorf("--remind, --stuck-after: %w", err)
			}
			return err
		},
	},
	{
		name:  "web",
		about: "serves the read-only web view (--web-listen; as a user of the reader role)",
		run:   runWeb,
	},
	{
		name:  "webhook",
		about: "delivers events and notices to the --subscriptions endpoints (signed CloudEvents)",
		run: func(ctx context.Context, fe functionEnv) error {
			if fe.emit.subscriptions == "" {
				if !fe.up {
					return errors.New("the webhook function needs --subscriptions FILE")
				}
				<-ctx.Done() // up without subscriptions: nothing to deliver
				return nil
			}
			subs, err := webhook.LoadFile(fe.emit.subscriptions)
			if err != nil {
				return err
			}
			return webhook.Run(ctx, fe.js, webhook.Config{
				Subscriptions: subs,
				FromStart:     fe.emit.fromStart,
				Log:           fe.a.log,
				Meters:        fe.tel.MeterProvider(),
			})
		},
	},
}

func findFunction(name string) (functionSpec, bool) {
	for _, f := range functions {
		if f.name == name {
			return f, true
		}
	}
	return functionSpec{}, false
}

func functionNames() string {
	names := make([]string, len(functions))
	for i, f := range functions {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// runFunctions runs the available functions until ctx is cancelled or one fails; ready is
// called once they are all started.
func (a *app) runFunctions(ctx context.Context, specs []functionSpec, fe functionEnv, ready func(names []string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A wrong signing setting stops everything before any function starts.
	check, stopCheck := context.WithCancel(ctx)
	_, err := fe.emit.authority(check, fe.a.log)
	stopCheck()
	if err != nil {
		return err
	}
	if _, err := notices.ParseLadder(fe.emit.remind); err != nil {
		return fmt.Errorf("--remind: %w", err)
	}
	if err := fe.emit.web.check(); err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		names []string
	)
	for _, spec := range specs {
		if spec.run == nil {
			a.log.Warn("function not available in this build; skipping", "function", spec.name)
			continue
		}
		names = append(names, spec.name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := spec.run(ctx, fe)
			if err == nil && ctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("function %s: %w", spec.name, err)
				}
				mu.Unlock()
				a.log.Error("function failed; stopping", "function", spec.name, "error", err)
				cancel()
			}
		}()
	}
	if len(names) == 0 {
		return errors.New("no function is available to run")
	}
	ready(names)
	<-ctx.Done()
	a.log.Info("stopping: draining functions")
	wg.Wait()
	return first
}
