package campaign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	fn "maintsignals/functions/campaign"
	commandfn "maintsignals/functions/command"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// stack is a real embedded server, provisioned, with the command function and one replica of
// the campaign function serving campaign commands; ticks are driven by the test (tick).
type stack struct {
	t   *testing.T
	env *testenv.Env
	f   *fn.Function
	cl  *client.Client
	now *clock
}

// clock is the campaign function's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newStack(t *testing.T, cfg fn.Config, opts ...testenv.Option) *stack {
	t.Helper()
	env := testenv.Start(t, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	cc := commandfn.Config{EntityRate: -1, MinNotice: cfg.MinNotice}
	if a, ok := cfg.Auth.(commandfn.Authority); ok {
		cc.Auth = a // the same signers for both functions
	}
	cmd, err := commandfn.New(ctx, env.JS, cc)
	if err != nil {
		t.Fatal(err)
	}
	run := func(rc function.Config) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := function.Run(ctx, env.JS, rc); err != nil {
				t.Errorf("%s: %v", rc.Name, err)
			}
		}()
	}
	run(cmd.RuntimeConfig())
	s := &stack{t: t, env: env, now: &clock{t: time.Now().UTC()}}
	if cfg.Now == nil {
		cfg.Now = s.now.Now
	}
	if s.f, err = fn.New(ctx, env.JS, cfg); err != nil {
		t.Fatal(err)
	}
	run(s.f.RuntimeConfigs()[0])
	wg.Add(1)
	go func() { defer wg.Done(); s.f.ServeKicks(ctx) }()
	if s.cl, err = client.New(env.NC, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// tick serves one tick now.
func (s *stack) tick() {
	s.t.Helper()
	if err := s.f.HandleTick(context.Background(), function.Message{}); err != nil {
		s.t.Fatal(err)
	}
}

// ids are n resource IDs over five subscriptions.
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("/subscriptions/sub-%d/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%05d", i%5, i)
	}
	return out
}

// upload stores the list of ids and returns its reference.
func (s *stack) upload(list []string) campaignspec.ListRef {
	s.t.Helper()
	return testenv.UploadList(s.t, context.Background(), s.env.JS, list)
}

// spec is a campaign over the list with windows from earliest on, every window announced at
// once unless lead says otherwise; edit changes the document.
func spec(id string, list campaignspec.ListRef, earliest time.Time, lead string, edit func(*campaignspec.Document)) campaignspec.Document {
	d := campaignspec.Document{
		ID: id, Reason: "control plane upgrade", Task: domain.TaskEverything,
		Selection: campaignspec.SelectionDocument{List: &list},
		Window: campaignspec.WindowDocument{Length: "1h", Earliest: earliest.UTC().Format(time.RFC3339),
			Deadline: earliest.Add(72 * time.Hour).UTC().Format(time.RFC3339)},
		Spread:       campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 50, MaxPerSlotPerSubscription: 20},
		AnnounceLead: lead,
	}
	if edit != nil {
		edit(&d)
	}
	return d
}

var seq int

// control sends a campaign command and returns its outcome.
func (s *stack) control(ctl core.Control) (core.Outcome, error) {
	s.t.Helper()
	seq++
	if ctl.ID == "" {
		ctl.ID = fmt.Sprintf("ctl-%d-%d", time.Now().UnixNano(), seq)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return s.cl.SendCampaign(ctx, ctl)
}

func (s *stack) mustControl(ctl core.Control) core.Outcome {
	s.t.Helper()
	o, err := s.control(ctl)
	if err != nil {
		s.t.Fatalf("%s %s: %v", ctl.Action, ctl.Campaign, err)
	}
	return o
}

// campaignEvents are the messages of a campaign's subject, oldest first, with their ce-type.
func (s *stack) campaignEvents(id string) []stored {
	s.t.Helper()
	var out []stored
	testenv.ReadStream(s.t, s.env.JS, domain.EventsStream, func(m jetstream.Msg) {
		if m.Subject() != domain.CampaignEventSubject(id) {
			return
		}
		out = append(out, stored{ceType: m.Headers().Get(domain.HeaderCEType), id: m.Headers().Get(domain.HeaderMsgID),
			subject: m.Headers().Get(domain.HeaderCESubject), body: m.Data()})
	})
	return out
}

type stored struct {
	ceType, id, subject string
	body                []byte
}

func (e stored) lifecycle() core.Event {
	var ev core.Event
	_ = json.Unmarshal(e.body, &ev)
	return ev
}

// applied counts, per entity key, the applied Pendings of campaign id's generation gen.
func (s *stack) applied(id string, gen int) map[string]int {
	out := map[string]int{}
	for _, ev := range s.events() {
		cid, g, withdraw, _, ok := admission.ParseCommandID(ev.CommandID)
		if ok && cid == id && g == gen && !withdraw && ev.Outcome == domain.OutcomeApplied {
			out[domain.MustKey(ev.ResourceID)]++
		}
	}
	return out
}

// waitApplied waits until n entities have an applied Pending of the generation.
func (s *stack) waitApplied(id string, gen, n int) map[string]int {
	s.t.Helper()
	var got map[string]int
	testenv.Eventually(s.t, 60*time.Second, fmt.Sprintf("%d applied announcements", n), func() bool {
		got = s.applied(id, gen)
		return len(got) >= n
	})
	return got
}

// phases reads the stored phases of campaign id's entities, by key.
func (s *stack) phases(id string) map[string]core.Entity {
	s.t.Helper()
	out := map[string]core.Entity{}
	err := s.cl.CampaignEntities(context.Background(), id, func(st campaignstore.Stored) error {
		out[st.Key] = st.Entity
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// send sends an ordinary command and waits for its outcome.
func (s *stack) send(c domain.Command) domain.Event {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.cl.Send(ctx, c)
	if res == nil {
		s.t.Fatalf("%s %s: %v", c.Task, c.ResourceID, err)
	}
	return res.Event
}

// report is the campaign as stored.
func (s *stack) report(id string) *core.Campaign {
	s.t.Helper()
	c, err := s.cl.Campaign(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func t0ctx() context.Context { return context.Background() }

// events are every outcome event of the entities, oldest first.
func (s *stack) events() []domain.Event {
	s.t.Helper()
	var out []domain.Event
	for _, stream := range domain.EventsStreams() {
		err := store.Read(context.Background(), s.env.JS, stream, jetstream.OrderedConsumerConfig{}, 0,
			func(m jetstream.Msg, _ uint64) error {
				ev, err := domain.DecodeEvent(m.Data())
				out = append(out, ev)
				return err
			})
		if err != nil {
			s.t.Fatal(err)
		}
	}
	return out
}
