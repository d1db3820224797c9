package main

import (
	"context"
	"fmt"
	"maintsignals/infra/provision"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// printReport prints a provisioning report for people or as JSON.
func (a *app) printReport(rep provision.Report, indent string) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, ch := range rep {
		detail := strings.Join(ch.Fields, ", ")
		if ch.Err != nil {
			if detail != "" {
				detail += ": "
			}
			detail += ch.Err.Error()
		}
		if detail == "" {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\n", indent, ch.Kind, ch.Name, ch.Action)
		} else {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, ch.Kind, ch.Name, ch.Action, detail)
		}
	}
	return tw.Flush()
}

type changeJSON struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Action string   `json:"action"`
	Fields []string `json:"fields,omitempty"`
	Error  string   `json:"error,omitempty"`
}

func (a *app) provisionCommand() *cobra.Command {
	var (
		replicas, partitions, inFlight, shards int
		eventsMaxAge                           time.Duration
		tick                                   time.Duration
		webhooks                               bool
	)
	c := &cobra.Command{
		Use:   "provision [flags]",
		Short: "Create or update the streams, bucket, consumers and tick schedule",
		Long: `Create or update, idempotently, everything the functions need on the NATS server at
--server: the streams MAINT_COMMANDS, MAINT_EVENTS, MAINT_NOTICES, MAINT_DLQ and MAINT_SCHEDULE,
the bucket maintenance, the durable consumers (one per command partition, and one per shard of
the tick for the emitter and for the notices function: --emitter-shards) and the tick schedule;
consumers the contract no longer has are deleted; with --webhooks, also the webhook feed
MAINT_WEBHOOK (a copy of every event and notice, for the webhook function). Prints what it
created, updated or left unchanged; exits with status 1 when something failed (a setting NATS
cannot change on an existing stream, such as the partition count, is reported as failed).`,
		Example: "  maintctl provision\n  maintctl provision --server nats://n1:4222,nats://n2:4222,nats://n3:4222 --replicas 3 --tick 1m",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			var rep provision.Report
			// A user that may not provision fails at once instead of waiting for the timeout.
			err = cl.Guard(ctx, ">", func(ctx context.Context) error {
				var err error
				// A NATS cluster that has just started (the Job runs beside it) holds leader
				// elections: retried as `up` does.
				rep, err = provision.RunRetrying(ctx, cl.JS, provision.Config{Replicas: replicas, Partitions: partitions, InFlight: inFlight, Tick: tick, EventsMaxAge: eventsMaxAge, Webhooks: webhooks, Shards: shards}, a.log)
				return err
			})
			if rep != nil {
				if a.json() {
					docs := make([]changeJSON, len(rep))
					for i, ch := range rep {
						docs[i] = changeJSON{Kind: ch.Kind, Name: ch.Name, Action: string(ch.Action), Fields: ch.Fields}
						if ch.Err != nil {
							docs[i].Error = ch.Err.Error()
						}
					}
					if werr := a.writeJSON(docs); werr != nil {
						return werr
					}
				} else if perr := a.printReport(rep, ""); perr != nil {
					return perr
				}
			}
			if err != nil {
				return withAdvice(fmt.Errorf("provision: %w", err), "provisioning takes a user of the operator role: connect as one with --nkey FILE or --creds FILE")
			}
			return nil
		},
	}
	d := provision.DefaultConfig()
	c.Flags().IntVar(&replicas, "replicas", d.Replicas, "replicas of every stream and of the bucket: 1, 3 or 5")
	c.Flags().IntVar(&partitions, "partitions", d.Partitions, "partitions of the commands stream")
	c.Flags().IntVar(&inFlight, "in-flight", d.InFlight, inFlightUsage)
	c.Flags().IntVar(&shards, "emitter-shards", d.Shards, emitterShardsUsage)
	c.Flags().DurationVar(&eventsMaxAge, "events-retention", d.EventsMaxAge, "how long outcome events (the audit history) are kept")
	c.Flags().DurationVar(&tick, "tick", d.Tick, "how often the emitter re-exports every state (at least 1s)")
	c.Flags().BoolVar(&webhooks, "webhooks", false, "also the webhook feed MAINT_WEBHOOK, for the webhook function (it copies every event and notice: one more write each)")
	return c
}

const emitterShardsUsage = "shares of each tick's emission and notices run (a consumer per shard, each served by one replica at a time): the most emitter and notices replicas that share a tick; restart those replicas after changing it"

const inFlightUsage = "commands of one partition out at once (to the one replica serving it, which runs different entities' commands at once and one entity's in order)"
