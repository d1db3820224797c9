package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ui "maintsignals/infra/cli"
	"maintsignals/infra/local"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/regions"

	"maintsignals/functions/hub"
)

func (a *app) regionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "regions",
		Short: "Show every region as the hub (maintctl hub) sees it: its counts and freshness",
		Long: `Show, on the hub (maintctl hub --regions east,west), every region it sources: the counts of the region's newest
summary, the tick time inside it (AS OF) and its age. A region whose summary is older than two
of its own ticks is stale and left out of the totals. -o json answers the shape of
GET /api/v1/regions.`,
		Example: "  maintctl --server nats://hub:4222 regions\n  maintctl regions -o json | jq .staleRegions",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			v, err := regions.Read(ctx, cl.JS, time.Now(), a.log)
			if err != nil {
				return err
			}
			if a.json() {
				return a.writeJSON(v)
			}
			return a.printRegions(v)
		},
	}
}

func (a *app) printRegions(v regions.View) error {
	cols := []ui.Column{{Header: "REGION"}, {Header: "STATUS"}, {Header: "AS OF"}, {Header: "AGE"}}
	for _, s := range domain.States {
		cols = append(cols, ui.Column{Header: strings.ToUpper(s.MetricValue())})
	}
	cols = append(cols, ui.Column{Header: "UPDATING"}, ui.Column{Header: "OVERDUE"}, ui.Column{Header: "STUCK"}, ui.Column{Header: "CONFLICTS"})
	t := ui.NewTable(cols...)
	row := func(name, status, asOf, age string, c regions.Counts) {
		cells := []string{name, status, asOf, age}
		for _, s := range domain.States {
			cells = append(cells, strconv.FormatInt(c.Counts[s], 10))
		}
		cells = append(cells, strconv.FormatInt(c.Updating, 10), strconv.FormatInt(c.Overdue, 10), strconv.FormatInt(c.Stuck, 10), strconv.FormatInt(c.Conflicts, 10))
		t.Row(name, cells...)
	}
	for _, r := range v.Regions {
		status, asOf, age := "fresh", "-", "never heard of"
		if r.Stale {
			status = "stale"
		}
		if r.AsOf != nil {
			asOf = r.AsOf.Format(time.RFC3339)
			age = (time.Duration(*r.AgeSeconds) * time.Second).String()
		}
		row(r.Region, status, asOf, age, r.Counts)
	}
	row("(fresh regions)", "", "", "", v.Totals)
	return t.Write(a.stdout, a.view())
}

type hubFlags struct {
	listen, leafListen, data, metricsListen, webListen string
	tick                                               time.Duration
	regions                                            []string
}

func (a *app) hubCommand() *cobra.Command {
	var f hubFlags
	c := &cobra.Command{
		Use:   "hub [flags]",
		Short: "Run the hub: the global view of the regions, joined to it as leaf nodes",
		// Not listed in the root help, which must fit a screen: `regions --help` and `up
		// --help` (--region, --hub) name it.
		Hidden: true,
		Long: `Run the hub on this machine: an embedded NATS server with JetStream in the domain "hub", a
leafnode listener where the regions (maintctl up --region NAME --hub URL) join, a stream that
sources the summaries of every region named by --regions from the region's own domain, and the
global view: maintctl regions, the /regions page and GET /api/v1/regions on --web-listen, and
the metrics cluster.maintenance.region.age and cluster.maintenance.region.entities.

The hub holds no record: a region keeps working with the hub stopped or its link cut, and the
hub shows it stale until its summaries come in again. Adding a region is restarting the hub
with it in --regions.`,
		Example: "  maintctl hub --regions east,west\n  maintctl up --region east --hub nats-leaf://127.0.0.1:7422 --listen 127.0.0.1:4333 --data ./east",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseClientFlags(cmd); err != nil {
				return err
			}
			return a.hub(cmd.Context(), f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:4222", "host:port where NATS accepts clients (maintctl regions)")
	fl.StringVar(&f.leafListen, "leafnodes-listen", "127.0.0.1:7422", "host:port where the regions join as leaf nodes")
	fl.StringVar(&f.data, "data", "./maintsignals-hub-data", "directory of the hub's JetStream store")
	fl.DurationVar(&f.tick, "tick", time.Minute, "how often the hub's metrics are exported")
	fl.StringVar(&f.metricsListen, "metrics-listen", "127.0.0.1:9464", `host:port of the Prometheus page when no OTLP endpoint is set ("" for none)`)
	fl.StringVar(&f.webListen, "web-listen", "127.0.0.1:8080", `host:port of the /regions page and GET /api/v1/regions ("" for none)`)
	fl.StringSliceVar(&f.regions, "regions", nil, "the regions whose summaries the hub sources, comma-separated (each a JetStream domain joined as a leaf node)")
	return c
}

func (a *app) hub(ctx context.Context, f hubFlags) error {
	if len(f.regions) == 0 {
		return fmt.Errorf("--regions: name the regions the hub sources, e.g. --regions east,west")
	}
	data, unlock, err := a.lockedData(f.data)
	if err != nil {
		return err
	}
	defer unlock()
	tel, err := a.setupTelemetry(ctx, "maintsignals-hub", f.metricsListen, f.tick)
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(tel)
	srv, err := embedded.Start(embedded.Config{Name: "maint-hub", StoreDir: data, Listen: f.listen, SyncAlways: true,
		Domain: domain.HubDomain, LeafListen: f.leafListen})
	if err != nil {
		return fmt.Errorf("start the hub's NATS on %s (leaf nodes %s): %w", f.listen, f.leafListen, err)
	}
	defer srv.Stop()
	nr, err := a.connectUp(ctx, srv.ClientURL(), srv.InProcessURL(), srv.Server, &local.Security{}, func() {})
	if err != nil {
		return err
	}
	defer nr.stop()
	ch, err := provision.Hub(ctx, nr.provision, provision.HubConfig{Regions: f.regions})
	if err != nil {
		return err
	}
	a.printf("hub: NATS on %s, regions join at %s\nstream %s %s, sourcing %s\nmetrics: %s\n", srv.ClientURL(), srv.LeafURL(), ch.Name, ch.Action, strings.Join(f.regions, ", "), metricsWhere(tel, a.env))
	return hub.Run(ctx, nr.provision, tel, hub.Config{WebListen: f.webListen, Log: a.log, Ready: func(addr string) {
		if addr != "" {
			a.printf("web: http://%s/regions\n", addr)
		}
		a.printf("ready: try `NATS_URL=%s maintctl regions`; Ctrl-C stops\n", srv.ClientURL())
	}})
}

// lockedData makes the --data directory absolute, creates it and locks it for this process.
func (a *app) lockedData(dir string) (string, func(), error) {
	data, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("--data %q: %w", dir, err)
	}
	if err := os.MkdirAll(data, 0o750); err != nil {
		return "", nil, fmt.Errorf("--data: %w", err)
	}
	unlock, err := local.Lock(data)
	if err != nil {
		return "", nil, err
	}
	return data, unlock, nil
}

// regionLink is a region's name and its hub's leafnode address (up --region --hub).
type regionLink struct{ name, hub string }

// checkRegion checks --region and --hub: both or neither, a region's name, a hub's address,
// one node (a region of several nodes is a deployment: see the operations guide).
func checkRegion(f upFlags) error {
	switch {
	case f.region == "" && f.hub == "":
		return nil
	case f.region == "" || f.hub == "":
		return fmt.Errorf("--region and --hub go together: a region joins a hub")
	case f.nodes > 1:
		return fmt.Errorf("--region runs on one node here; run a region of several nodes as a deployment (infra/docs/operations.md, Regions)")
	}
	if err := domain.ValidRegion(f.region); err != nil {
		return fmt.Errorf("--region: %w", err)
	}
	if _, err := embedded.ParseLeafURL(f.hub); err != nil {
		return fmt.Errorf("--hub: %w", err)
	}
	return nil
}
