package dlq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

// deadLetter stores a dead letter as the runtime or the webhook function does (sub: its
// subscription, "" for a command).
func deadLetter(t *testing.T, env *testenv.Env, id, sub string) {
	t.Helper()
	m := nats.NewMsg(domain.DLQSubject(domain.MustKey(cluster)))
	m.Header.Set(function.HeaderDLQReason, "injected")
	if sub != "" {
		m.Header.Set(domain.HeaderWebhookSubscription, sub)
		m.Header.Set(domain.HeaderCEID, id)
		m.Data = []byte(`{"resourceId":"` + cluster + `","task":"Pending"}`)
	} else {
		m.Data, _ = domain.Command{ID: id, ResourceID: cluster, Task: domain.TaskPending}.Encode()
	}
	if _, err := env.JS.PublishMsg(testenv.Context(t, 5*time.Second), m); err != nil {
		t.Fatal(err)
	}
}

func ids(ls []dlq.Letter) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.CommandID)
	}
	return fmt.Sprint(s)
}

func TestListWhere_SinceSubscriptionLimit(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 10*time.Second)
	deadLetter(t, env, "old-cmd", "")
	deadLetter(t, env, "old-hook", "crm")
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	deadLetter(t, env, "new-cmd", "")
	deadLetter(t, env, "new-hook", "crm")
	deadLetter(t, env, "new-other", "pager")
	for _, tc := range []struct {
		f           dlq.Filter
		want        string
		wantOmitted int
	}{
		{dlq.Filter{}, "[old-cmd old-hook new-cmd new-hook new-other]", 0},
		{dlq.Filter{Since: mid}, "[new-cmd new-hook new-other]", 0},
		{dlq.Filter{Subscription: "crm"}, "[old-hook new-hook]", 0},
		{dlq.Filter{Since: mid, Subscription: "crm"}, "[new-hook]", 0},
		{dlq.Filter{Limit: 2}, "[new-hook new-other]", 3},
	} {
		got, omitted, err := dlq.ListWhere(ctx, env.JS, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != tc.want || omitted != tc.wantOmitted {
			t.Errorf("%+v: %s (%d omitted), want %s (%d)", tc.f, ids(got), omitted, tc.want, tc.wantOmitted)
		}
	}
	r, err := dlq.ReplayWhere(ctx, env.JS, dlq.Filter{Subscription: "crm", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Done) != 2 || r.Done[0].Letter.CommandID != "old-hook" || r.Done[0].Ack.Stream != domain.WebhookStream {
		t.Fatalf("replayed %+v, want both crm deliveries (the limit does not apply) to the webhook feed", r.Done)
	}
	if left, _, _ := dlq.ListWhere(ctx, env.JS, dlq.Filter{}); ids(left) != "[old-cmd new-cmd new-other]" {
		t.Errorf("left %s", ids(left))
	}
}
