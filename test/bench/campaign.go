package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	campaignfn "maintsignals/functions/campaign"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// campaignSizes of one run: the entities of the announced campaign, and of the dry run.
type campaignSizes struct{ announce, dryRun int }

var (
	fullCampaigns  = campaignSizes{announce: 100_000, dryRun: 1_000_000}
	smokeCampaigns = campaignSizes{announce: 500, dryRun: 2000}
)

// benchCampaigns measures, on one fresh server with one command function and one campaign
// function as `maintctl up` runs them: the campaign's announcements applied per second against
// the same Pending commands published directly with async publishes (the same number, to as
// many other entities), the time from the create (the list's upload included) to the last
// applied announcement, and a dry run of a larger list.
func benchCampaigns(ctx context.Context, s campaignSizes, out io.Writer) error {
	srv, err := startServer(ctx, topology{replicas: 1})
	if err != nil {
		return err
	}
	defer srv.stop()
	stopCommands, err := startReplicas(ctx, srv.connect, 1, nil)
	if err != nil {
		return err
	}
	defer stopCommands()
	// In the order direct, campaign, campaign, direct: the load of the machine, and the
	// streams and the bucket growing, weigh on both alike.
	var direct, viaCampaign []float64
	var total time.Duration
	for round, viaFn := range []bool{false, true, true, false} {
		tag := fmt.Sprintf("r%d", round)
		if !viaFn {
			rate, err := announceDirectly(ctx, srv.js, tag, s.announce)
			if err != nil {
				return fmt.Errorf("direct announcements: %w", err)
			}
			direct = append(direct, rate)
			fmt.Fprintf(out, "%d Pending commands published directly (async): %.0f applied/s\n", s.announce, rate)
			continue
		}
		rate, took, err := announceByCampaign(ctx, srv, tag, s.announce)
		if err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
		viaCampaign, total = append(viaCampaign, rate), total+took/2
		fmt.Fprintf(out, "campaign of %d entities from one list: %.0f announcements applied/s; create to the last applied: %.1f s\n", s.announce, rate, took.Seconds())
	}
	dry, err := dryRunOnce(ctx, srv.js, s.dryRun)
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	fmt.Fprintf(out, "dry run of %d entities: %.1f s\n", s.dryRun, dry.Seconds())
	fmt.Fprintf(out, "ratio campaign_announce %.2f\n", mean(viaCampaign)/mean(direct))
	fmt.Fprintf(out, "s campaign_100k %.1f\n", total.Seconds())
	fmt.Fprintf(out, "s campaign_dryrun_1m %.1f\n", dry.Seconds())
	return nil
}

// campaignList is n resource IDs over a hundred subscriptions, as a list file's bytes.
func campaignList(tag string, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "/subscriptions/sub-%03d/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s-%07d\n", i%100, tag, i)
	}
	return b.Bytes()
}

// campaignSpec is a campaign over the list whose every window is announced at once.
func campaignSpec(id string, ref campaignspec.ListRef, n int) campaignspec.Document {
	earliest := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	across := 336 * time.Hour
	if n > 300_000 {
		across *= 4
	}
	return campaignspec.Document{
		ID: id, Reason: "bench", Task: domain.TaskEverything, Selection: campaignspec.SelectionDocument{List: &ref},
		Window:       campaignspec.WindowDocument{Length: "4h", Earliest: earliest.Format(time.RFC3339), Deadline: earliest.Add(across + 24*time.Hour).Format(time.RFC3339)},
		Spread:       campaignspec.SpreadDocument{Across: domain.FormatDuration(across), Slot: "15m", MaxPerSlot: 500, MaxPerSlotPerSubscription: 20},
		AnnounceLead: domain.FormatDuration(across + 48*time.Hour),
	}
}

// announceDirectly publishes the announcements of a campaign's plan (the same commands the
// campaign would send) with async publishes and returns the rate at which they were applied:
// from the first applied outcome to the last.
func announceDirectly(ctx context.Context, js jetstream.JetStream, tag string, n int) (float64, error) {
	id := "direct-" + tag
	l, err := campaign.ParseList(bytes.NewReader(campaignList(id, n)))
	if err != nil {
		return 0, err
	}
	s, rej := campaignSpec(id, l.Ref(l.SHA256), n).Compile()
	if rej != nil {
		return 0, rej
	}
	c := campaign.NewCampaign(s, time.Now())
	plan := campaign.NewPlan(s, l.Entries, nil, campaign.Settings{}, time.Now())
	msgs := make([]*nats.Msg, 0, n)
	for i := range plan.Len() {
		e, key := plan.Entity(i), plan.At(i).Key
		if e.Window != nil {
			msgs = append(msgs, commandMsg(campaign.Announcement(c, key, e).Command))
		}
	}
	from, err := eventsEnd(ctx, js)
	if err != nil {
		return 0, err
	}
	pub, _ := jetstream.New(natsConn(js), jetstream.WithPublishAsyncMaxPending(4096))
	for _, m := range msgs {
		if err := publishAsync(ctx, pub, m); err != nil {
			return 0, err
		}
	}
	return appliedRate(ctx, js, from, "campaign."+id+".", len(msgs))
}

// natsConn is the connection under js.
func natsConn(js jetstream.JetStream) *nats.Conn { return js.Conn() }

// announceByCampaign creates a campaign of n entities as `maintctl campaign create` does (the
// list stored, the create sent) with a campaign function running, and returns the rate of its
// applied announcements (first to last) and the time from the create to the last.
func announceByCampaign(ctx context.Context, srv *server, tag string, n int) (float64, time.Duration, error) {
	id := "bench-" + tag
	nc, err := srv.connect()
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- campaignfn.Run(fctx, js, campaignfn.Config{}) }()
	defer func() { stop(); <-done }()
	from, err := eventsEnd(ctx, srv.js)
	if err != nil {
		return 0, 0, err
	}
	cl, err := client.New(srv.nc, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	data := campaignList(id, n)
	l, err := campaign.ParseList(bytes.NewReader(data))
	if err != nil {
		return 0, 0, err
	}
	if _, err := campaignstore.PutList(ctx, srv.js, l, data); err != nil {
		return 0, 0, err
	}
	doc := campaignSpec(id, l.Ref(l.SHA256), n)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := cl.SendCampaign(cctx, campaign.Control{ID: id + "-create", Campaign: id, Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		return 0, 0, err
	}
	rate, err := appliedRate(ctx, srv.js, from, "campaign."+id+".", n)
	return rate, time.Since(start), err
}

// appliedRate waits until n applied Pendings whose ids start with prefix are stored after
// the sequences from (eventsEnd), and returns their rate from the first stored to the last.
func appliedRate(ctx context.Context, js jetstream.JetStream, from map[string]uint64, prefix string, n int) (float64, error) {
	var first, last time.Time
	seen := 0
	deadline := time.Now().Add(15 * time.Minute)
	for seen < n {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d applied after 15 minutes", seen, n)
		}
		for stream, start := range from {
			cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}
			err := store.Read(ctx, js, stream, cfg, 0, func(m jetstream.Msg, seq uint64) error {
				from[stream] = seq + 1
				ev, err := domain.DecodeEvent(m.Data())
				if err != nil || ev.Outcome != domain.OutcomeApplied || ev.Task != domain.TaskPending || !strings.HasPrefix(ev.CommandID, prefix) {
					return nil
				}
				md, _ := m.Metadata()
				if seen == 0 || md.Timestamp.Before(first) {
					first = md.Timestamp
				}
				if md.Timestamp.After(last) {
					last = md.Timestamp
				}
				seen++
				return nil
			})
			if err != nil {
				return 0, err
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return float64(n-1) / last.Sub(first).Seconds(), nil
}

// dryRunOnce plans n entities as `maintctl campaign create --dry-run` does: the list read,
// the selection and the policies read, the plan, and its report.
func dryRunOnce(ctx context.Context, js jetstream.JetStream, n int) (time.Duration, error) {
	data := campaignList("dry", n)
	start := time.Now()
	l, err := campaign.ParseList(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	s, rej := campaignSpec("dry", l.Ref(l.SHA256), n).Compile()
	if rej != nil {
		return 0, rej
	}
	sel, rej, err := campaignstore.Select(ctx, js, s, l)
	if err != nil || rej != nil {
		return 0, fmt.Errorf("select: %v %v", err, rej)
	}
	var cache campaignstore.PolicyCache
	pol, err := cache.Load(ctx, js)
	if err != nil {
		return 0, err
	}
	plan := campaign.NewPlan(s, sel, pol, campaign.Settings{}, time.Now())
	if err := plan.Render(io.Discard); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
