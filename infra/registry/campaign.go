package registry

import (
	"slices"

	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"

	"maintsignals/functions/campaign"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
)

// RoleCampaign is the NATS role of the campaign function: it publishes commands (the
// campaigns' announcements and withdrawals) and campaign events, and writes the campaigns'
// buckets; it writes no record and no outcome event of an entity.
const RoleCampaign = "campaign"

// The campaigns' buckets and lists as streams and subjects.
const (
	CampaignsStream         = "KV_" + domain.CampaignsBucket
	CampaignEntitiesStream  = "KV_" + domain.CampaignEntitiesBucket
	CampaignListsStream     = "OBJ_" + domain.CampaignListsBucket
	CampaignsSubjects       = "$KV." + domain.CampaignsBucket + ".>"
	CampaignEntitySubjects  = "$KV." + domain.CampaignEntitiesBucket + ".>"
	CampaignListsSubjects   = "$O." + domain.CampaignListsBucket + ".>"
	campaignTickDescription = "campaign function: one replica serves each tick"
)

func campaignFunction() Function {
	return Function{
		Name:  "campaign",
		About: "plans fleet campaigns, announces their windows as they come due and tracks every entity (campaign commands and each tick)",
		Role:  RoleCampaign,
		Tick:  true,
		Drain: campaign.DrainTimeout,
		Consumers: func(t Topology) []Consumer {
			return []Consumer{campaignCommands(t), tickConsumer(t, domain.CampaignConsumer, domain.Shard{Index: 0, Of: 1}, campaignTickDescription)}
		},
		Serves: []Serve{
			{Stream: domain.CampaignsStream, Consumer: domain.CampaignConsumer},
			{Stream: domain.ScheduleStream, Consumer: domain.CampaignConsumer, Pinned: true},
		},
		// Commands to the campaigns' entities, the campaigns' events and buckets; it reads the
		// outcome events, the lists, the records (prefix selections, rescheduled windows) and
		// the policies.
		Access: Access{
			Publish: []string{domain.CommandPrefix + "*", domain.CampaignEventPrefix + "*", CampaignsSubjects, CampaignEntitySubjects},
			Read:    slices.Concat([]string{CampaignsStream, CampaignEntitiesStream, domain.EventsStream, CampaignListsStream, domain.PoliciesBucketStream}, RecordsStreams, EventsStreams),
			Get:     []string{domain.ScheduleStream},
		},
		Flags: campaignFlags,
	}
}

// campaignCommands is the consumer of the campaign commands: one at a time, in stream order.
func campaignCommands(t Topology) Consumer {
	return Consumer{Stream: domain.CampaignsStream, ConsumerConfig: jetstream.ConsumerConfig{
		Durable:       domain.CampaignConsumer,
		Description:   "campaign function: the campaign commands, one at a time",
		FilterSubject: domain.CampaignCommandPrefix + "*",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 1,
		AckWait:       t.AckWait,
		MaxDeliver:    -1, // the runtime has the last word, as for commands
		Replicas:      t.Replicas,
	}}
}

func campaignFlags(fs *pflag.FlagSet) Instance {
	var cfg campaign.Config
	// The command function's --min-notice: `up` gives both the one value, so that the plan
	// leaves each window the notice the command function asks for.
	fs.DurationVar(&cfg.MinNotice, "min-notice", 0, "refuse a Pending whose window starts sooner than this after the command is handled, unless forced (0: no minimum); a customer's policy may ask for more")
	authority := signingFlags(fs, &cfg.MaxCommandAge)
	key := fs.String("signing-key", "", "file with the nkey seed (SU…) the campaign function signs its announcements and withdrawals with; its public key goes into the command function's --signers with the role campaign")
	signer := func() (nkeys.KeyPair, error) {
		if *key == "" {
			return nil, nil
		}
		kp, err := signing.LoadSeed(*key)
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		return kp, nil
	}
	inst := authority.instance(func(ctx context.Context, env Env, auth *signing.Watched) error {
		kp, err := signer()
		if err != nil {
			return err
		}
		c := cfg
		c.Signer, c.Tick, c.Logger, c.Meters, c.Telemetry = kp, env.Tick, env.Log, env.Tel.MeterProvider(), env.Tel
		if auth != nil {
			c.Auth = auth
		}
		return campaign.Run(ctx, env.JS, c)
	})
	// A seed that does not load fails the check before anything starts, as a bad signers
	// file does.
	check := inst.Check
	inst.Check = func(ctx context.Context, log *slog.Logger) error {
		if _, err := signer(); err != nil {
			return err
		}
		return check(ctx, log)
	}
	return inst
}
