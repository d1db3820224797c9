package natsconn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

// publishTimeout is what a caller would wait for a PubAck; a permission error must come well
// before it.
const publishTimeout = 10 * time.Second

// fast is "at once": one round trip to the server, with room for a busy machine.
const fast = 2 * time.Second

// limitedServer starts a server with a stream S on ok.> and denied.>, a bucket b, and two
// users: boss (everything) and limited (may publish to ok.> and the JetStream API, and
// receive replies on _INBOX_limited only).
func limitedServer(t *testing.T) (s *embedded.Server, boss, limited natstest.User) {
	t.Helper()
	boss, limited = natstest.NewUser(t), natstest.NewUser(t)
	s = testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{
		{Nkey: boss.Public},
		{Nkey: limited.Public, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"ok.>", "$JS.API.>"}, Deny: []string{"denied.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX_limited.>"}},
		}},
	}})
	c := connect(t, s, boss, "")
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"ok.>", "denied.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"}); err != nil {
		t.Fatal(err)
	}
	return s, boss, limited
}

// connect connects in-process as u.
func connect(t *testing.T, s *embedded.Server, u natstest.User, inbox string) *natsconn.Conn {
	t.Helper()
	c, err := natsconn.Connect(testenv.Context(t, 5*time.Second), natsconn.Options{
		Servers:     s.InProcessURL(),
		NkeyFile:    u.SeedFile,
		InboxPrefix: inbox,
		Logger:      quiet,
		Extra:       []nats.Option{nats.InProcessServer(s.Server)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestPublishMsg_DeniedSubjectReportsAPermissionErrorAtOnce(t *testing.T) {
	s, _, limited := limitedServer(t)
	c := connect(t, s, limited, "_INBOX_limited")
	for i := range 2 { // every denied publish, not only the first
		start := time.Now()
		_, err := c.Publish(testenv.Context(t, publishTimeout), "denied.x", []byte("no"))
		took := time.Since(start)
		var pe *natsconn.PermissionError
		if !errors.As(err, &pe) || pe.Op != "publish" || pe.Subject != "denied.x" {
			t.Fatalf("publish %d: %v, want a PermissionError for publish to denied.x", i, err)
		}
		if !errors.Is(err, natsconn.ErrPermissionDenied) || !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("publish %d: %v does not match ErrPermissionDenied and nats.ErrPermissionViolation", i, err)
		}
		if took > fast {
			t.Errorf("publish %d: the permission error took %s (publish timeout %s)", i, took, publishTimeout)
		}
	}
	if ack, err := c.Publish(testenv.Context(t, publishTimeout), "ok.x", []byte("yes")); err != nil || ack.Stream != "S" {
		t.Fatalf("allowed publish: %+v, %v", ack, err)
	}
}

func TestPlainJetStreamPublish_DeniedSubjectOnlyTimesOut(t *testing.T) {
	// The reason for Conn.PublishMsg: without it a denied publish looks like a slow server.
	s, _, limited := limitedServer(t)
	c := connect(t, s, limited, "_INBOX_limited")
	_, err := c.JS.Publish(testenv.Context(t, time.Second), "denied.x", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("plain publish to a denied subject: %v, want a timeout", err)
	}
}

func TestGuard(t *testing.T) {
	s, _, limited := limitedServer(t)
	c := connect(t, s, limited, "_INBOX_limited")
	t.Run("a call that publishes for you fails at once on a matching filter", func(t *testing.T) {
		kv, err := c.JS.KeyValue(testenv.Context(t, 5*time.Second), "b")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = c.Guard(testenv.Context(t, publishTimeout), "$KV.b.>", func(ctx context.Context) error {
			_, err := kv.Put(ctx, "k", []byte("v"))
			return err
		})
		var pe *natsconn.PermissionError
		if !errors.As(err, &pe) || pe.Subject != "$KV.b.k" || time.Since(start) > fast {
			t.Fatalf("guarded put: %v after %s, want a PermissionError on $KV.b.k at once", err, time.Since(start))
		}
	})
	t.Run("a violation on another subject does not fail the call", func(t *testing.T) {
		err := c.Guard(testenv.Context(t, publishTimeout), "ok.>", func(ctx context.Context) error {
			if err := c.NC.Publish("denied.y", nil); err != nil {
				return err
			}
			if err := c.NC.FlushWithContext(ctx); err != nil {
				return err
			}
			_, err := c.JS.Publish(ctx, "ok.y", nil)
			return err
		})
		if err != nil {
			t.Fatalf("guarded allowed publish: %v", err)
		}
	})
	t.Run("the call's own error passes through", func(t *testing.T) {
		want := errors.New("own")
		if err := c.Guard(testenv.Context(t, time.Second), "ok.>", func(context.Context) error { return want }); err != want {
			t.Fatalf("Guard = %v, want the call's error", err)
		}
	})
}

func TestGuard_RefusedInboxFailsEveryRequestAtOnce(t *testing.T) {
	s, _, limited := limitedServer(t)
	c := connect(t, s, limited, "") // replies on _INBOX., which limited may not subscribe to
	for i := range 2 {
		start := time.Now()
		_, err := c.Publish(testenv.Context(t, publishTimeout), "ok.x", nil)
		var pe *natsconn.PermissionError
		if !errors.As(err, &pe) || pe.Op != "subscribe" || !strings.HasPrefix(pe.Subject, "_INBOX.") {
			t.Fatalf("request %d: %v, want a PermissionError for subscribe to _INBOX.…", i, err)
		}
		if took := time.Since(start); took > fast {
			t.Errorf("request %d: took %s", i, took)
		}
	}
}
