// Command soak runs the whole stack in compressed time and judges whether anything grows: a
// nats-server process and a process per function, steady commands at a share of the capacity
// measured at the start with entities made, changed and forgotten, and a SIGKILL of each
// function and of the server in turn. Each tick it samples every process's resident memory,
// open files, goroutines and heap goal, the server's memory, the consumers' backlogs, the
// records buckets' bytes and interior deletes, the commands' p99 and the tick's coverage.
// Over the second half it judges each series' Theil–Sen slope (at most 2 % of its level per
// hour), the coverage (100 % on every tick but the one after a kill) and, at the end, every
// command against the records (none lost or applied twice). It prints one line per series
// and a last line "soak: pass …" or "soak: fail …", and exits 1 on a failure.
//
// Usage: go run ./test/soak [-duration 10m] [-tick 5s] [-plant-leak]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the soak's flags.
type options struct {
	duration, tick, settle, killEvery, forgetAfter time.Duration
	markerTTL                                      time.Duration
	entities                                       int
	share, rate, churn                             float64
	plantLeak, keep, webhooks                      bool
	seed                                           uint64
	samples                                        string
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the steady load runs (the setup and the audit come on top)")
	flag.DurationVar(&o.tick, "tick", 5*time.Second, "the schedule's tick: the time compression (production ticks every minute)")
	flag.DurationVar(&o.settle, "settle", 2*time.Minute, "samples of a process this soon after it (re)started are left out of its series (its memory settles)")
	flag.DurationVar(&o.killEvery, "kill-every", 0, "a SIGKILL of the next process in turn this often (0: each process once over the run)")
	flag.DurationVar(&o.forgetAfter, "forget-after", time.Minute, "the command function's --forget-after: how long a forgotten entity's tombstone stays (30 days in production)")
	flag.DurationVar(&o.markerTTL, "marker-ttl", time.Minute, "how long the marker of an expired tombstone stays in the bucket (an hour in production)")
	flag.IntVar(&o.entities, "entities", 1000, "the fleet the load starts with")
	flag.Float64Var(&o.share, "load", 0.3, "the share of the measured capacity the steady load sends")
	flag.Float64Var(&o.rate, "rate", 0, "commands per second of the steady load (0: -load of the measured capacity)")
	flag.Float64Var(&o.churn, "churn", 0.02, "the share of commands that make a new entity, and the share that forget one")
	flag.BoolVar(&o.plantLeak, "plant-leak", false, "make the emitter leak a goroutine per tick (its hidden test switch): the soak must fail")
	flag.BoolVar(&o.webhooks, "webhooks", true, "run the webhook feed and the webhook function (as maintctl up does)")
	flag.BoolVar(&o.keep, "keep", false, "keep the processes' logs and the server's store (their directories are logged at the end)")
	flag.Uint64Var(&o.seed, "seed", 1, "the load's random seed")
	flag.StringVar(&o.samples, "samples", "", "write every sample to this CSV file (series, seconds, lifetime, value)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pass, err := run(ctx, o, log)
	if err != nil {
		fmt.Println("soak: fail —", err)
		os.Exit(1)
	}
	if !pass {
		os.Exit(1)
	}
}
