// Package web is the read-only web view of the fleet: the fleet page (counts per state,
// overdue, stuck and conflicting entities, the windows of the coming days on a time line, and
// the entities in a table filtered by state and resource-ID prefix, paged), one entity's page
// (its record, history, notices and the policy in force) and the campaigns' pages (status,
// burndown, phases, waves).
//
// Pages are rendered on the server (html/template; templates and assets embedded), so the
// tables and links work without JavaScript; the same URLs answer JSON to
// `Accept: application/json`, and a stream of server-sent events to `Accept:
// text/event-stream`, which the one small script of the pages follows to refresh what
// changed without a reload.
//
// A replica answers the fleet page from memory: one watch of the bucket (an ordered consumer
// on its stream, as the reader role allows) keeps a compact summary of every entity in key
// order (index.go), so any number of replicas serve any number of readers and a page costs
// the same at a million entities as at ten. It never writes: it needs the reader role only.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
)

// Name is the function's name (maintctl function web).
const Name = "web"

// Bucket names followed besides the records.
const (
	bucketPolicies  = domain.PoliciesBucket
	bucketCampaigns = domain.CampaignsBucket
	bucketEntities  = domain.CampaignEntitiesBucket
)

// View is the web view of one replica.
type View struct {
	cfg       Config
	js        jetstream.JetStream
	cl        *client.Client
	log       *slog.Logger
	fleet     *index
	campaigns *campaigns
	live      *hub
	pages     *pages
	// decode reads the summary of a record (the fields the index keeps).
	decode func([]byte) (domain.Record, error)

	streams atomic.Int64 // live pages being served
	// ready tells readiness whether the buckets are read (set by Serve, before it follows).
	ready func(bool)

	loaded    atomic.Bool  // the bucket's records as of the first read are in the index
	loading   atomic.Int64 // records read since the read started
	followers []*follower

	// seal seals the API's page tokens; walks keeps the snapshots of its walks.
	seal  *sealer
	walks *walks
	// doc is the API's OpenAPI document.
	doc []byte
}

// New prepares the view on js (no connection to any bucket is needed yet: each is followed
// once it exists). It listens on nothing: Run or Serve do.
func New(js jetstream.JetStream, cfg Config) (*View, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("function", Name)
	cl, err := client.New(js.Conn(), log)
	if err != nil {
		return nil, err
	}
	v := &View{cfg: cfg, js: js, cl: cl, log: log, fleet: newIndex(cfg.StuckAfter),
		campaigns: newCampaigns(log), live: newHub(), decode: decodeSummary}
	if v.seal, err = newSealer(cfg.PageTokenKey); err != nil {
		return nil, err
	}
	v.walks = newWalks()
	if v.doc, err = Document(); err != nil {
		return nil, err
	}
	if v.pages, err = newPages(v); err != nil {
		return nil, err
	}
	v.followers = v.makeFollowers()
	return v, nil
}

// Run serves the view on cfg's address until ctx ends (maintctl function web, maintctl up).
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	v, err := New(js, cfg)
	if err != nil {
		return err
	}
	ln := v.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", v.cfg.Listen); err != nil {
			return fmt.Errorf("web: listen: %w", err)
		}
	}
	return v.Serve(ctx, ln)
}

// Serve follows the buckets and serves the pages on ln until ctx ends, then stops (the live
// streams are closed; requests in flight get a few seconds).
func (v *View) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v.ready = func(ok bool) { function.ReportServing(ctx, Name, ok, false) }
	v.ready(false)
	var wg sync.WaitGroup
	for _, f := range v.followers {
		wg.Go(func() { f.run(ctx) })
	}
	srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		TLSConfig: v.cfg.tls, BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog: slog.NewLogLogger(v.log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if v.cfg.tls != nil {
		scheme = "https"
	}
	v.log.Info("web view listening", "url", scheme+"://"+ln.Addr().String(), "token", v.cfg.TokenFile != "", "customer_tokens", v.cfg.tokens.customers(), "client_certificates", v.cfg.ClientCA != "")
	errc := make(chan error, 1)
	go func() {
		if v.cfg.tls != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	function.ReportServing(ctx, Name, v.Loaded(), true)
	cancel()
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// setLoaded says whether the fleet index holds the records bucket, to the pages and to
// readiness.
func (v *View) setLoaded(ok bool) {
	v.loaded.Store(ok)
	v.report()
}

// report tells readiness whether the view is loaded.
func (v *View) report() {
	if v.ready != nil {
		v.ready(v.Loaded())
	}
}

// Loaded reports whether the view holds every bucket it follows as of its first read (the
// records, the policies and the campaigns'; a bucket that does not exist counts as read).
func (v *View) Loaded() bool {
	return v.loaded.Load() && v.read(bucketPolicies, bucketCampaigns, bucketEntities)
}

// read reports whether the buckets were each read once.
func (v *View) read(buckets ...string) bool {
	for _, f := range v.followers {
		if slices.Contains(buckets, f.bucket) && !f.read.Load() {
			return false
		}
	}
	return true
}

// makeFollowers are the watches of the four buckets.
func (v *View) makeFollowers() []*follower {
	f := func(bucket string) *follower {
		return &follower{js: v.js, bucket: bucket, log: v.log, retry: v.cfg.Retry}
	}
	// One follower per cell: each resets and catches up on its own cell's records.
	var cells []*follower
	for _, c := range domain.AllCells() {
		records := f(c.RecordsBucket())
		records.key = domain.KeyFromSubject
		records.reset = func() {
			v.setLoaded(false)
			v.fleet.resetWhere(func(key string) bool { return domain.CellOf(key) == c })
		}
		records.apply = v.applyRecords
		records.caughtUp = func() {
			if v.recordsRead() {
				v.setLoaded(true)
				v.live.publish(topic{kind: topicFleet})
			}
		}
		cells = append(cells, records)
	}

	policies := f(bucketPolicies)
	policies.key = domain.KeyFromSubject
	policies.reset = func() { v.fleet.clearPolicies() }
	policies.apply = v.applyPolicies
	policies.caughtUp = v.report

	states := f(bucketCampaigns)
	states.reset = v.campaigns.resetStates
	states.apply = func(b []change) { v.publishCampaigns(v.campaigns.applyStates(b)) }
	states.caughtUp = v.report
	states.present = func(ok bool) { v.campaigns.setFound(bucketCampaigns, ok) }

	entities := f(bucketEntities)
	entities.reset = v.campaigns.resetEntities
	entities.apply = func(b []change) { v.publishCampaigns(v.campaigns.applyEntities(b)) }
	entities.caughtUp = v.report
	return append(cells, policies, states, entities)
}

// recordsRead reports whether every cell's records were read once.
func (v *View) recordsRead() bool {
	for _, f := range v.followers {
		if strings.HasPrefix(f.bucket, domain.RecordsBucketPrefix) && !f.read.Load() {
			return false
		}
	}
	return true
}

func (v *View) applyRecords(batch []change) {
	if bad := v.fleet.apply(batch, v.decode); bad > 0 {
		v.log.Warn("records that do not decode are left out of the fleet view", "count", bad)
	}
	v.loading.Add(int64(len(batch)))
	if !v.loaded.Load() {
		return
	}
	keys := make([]string, len(batch))
	for i, c := range batch {
		keys[i] = c.key
	}
	v.live.publishKeys(topicFleet, keys)
	v.live.publishKeys(topicEntity, keys)
}

func (v *View) applyPolicies(batch []change) {
	scopes := make([]string, 0, len(batch))
	for _, c := range batch {
		scopes = append(scopes, c.key)
		if c.deleted {
			v.fleet.setPolicy(c.key, nil)
			continue
		}
		// A policy that does not read stays in force without a document: it hides the broader
		// scopes' policies from its entities, as it does in the emitter and the notices.
		p, err := policy.ParseStored(c.value)
		if err != nil {
			v.log.Warn("a stored policy does not read; its scope shows no policy", "scope_key", c.key, "error", err)
		}
		v.fleet.setPolicy(c.key, &fleet.InForce{Policy: p, Since: c.at})
	}
	if v.loaded.Load() {
		// A policy changes the conflicts of the entities its scope covers, and what their
		// pages show.
		v.live.publishKeys(topicFleet, scopes)
		v.live.publishUnder(topicEntity, scopes)
	}
}

func (v *View) publishCampaigns(ids []string) {
	v.live.publishKeys(topicCampaign, ids)
	v.live.publish(topic{kind: topicCampaigns})
}
