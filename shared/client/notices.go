package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// StoredNotice is a lifecycle notice with where it sits in MAINT_NOTICES.
type StoredNotice struct {
	domain.Notice
	Seq uint64 `json:"-"`
}

func noticeFilter(resourceID string) (string, error) {
	if resourceID == "" {
		return domain.NoticePrefix + "*", nil
	}
	key, err := domain.Key(resourceID)
	if err != nil {
		return "", err
	}
	return domain.NoticeSubject(key), nil
}

// Notices returns every lifecycle notice of resourceID ("" for every entity) kept in
// MAINT_NOTICES, oldest first.
func (c *Client) Notices(ctx context.Context, resourceID string) ([]domain.Notice, error) {
	subject, err := noticeFilter(resourceID)
	if err != nil {
		return nil, err
	}
	var out []domain.Notice
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		out = nil
		return c.eachNotice(ctx, subject, time.Time{}, func(n StoredNotice) error {
			out = append(out, n.Notice)
			return nil
		})
	})
	return out, err
}

// NoticeFilter selects lifecycle notices: the bounds of a stream read, and the kinds kept.
type NoticeFilter struct {
	StreamFilter
	// Kinds keeps the notices of these kinds (none: every kind); the limit counts only them.
	Kinds []domain.NoticeKind
}

// NoticesWhere reads the notices that f selects, oldest first, in one streaming pass.
func (c *Client) NoticesWhere(ctx context.Context, f NoticeFilter) (Page[StoredNotice], error) {
	subject, err := noticeFilter(f.ResourceID)
	if err != nil {
		return Page[StoredNotice]{}, err
	}
	keep := newest[StoredNotice]{limit: f.Limit}
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		keep = newest[StoredNotice]{limit: f.Limit}
		return c.eachNotice(ctx, subject, f.Since, func(n StoredNotice) error {
			if len(f.Kinds) == 0 || slices.Contains(f.Kinds, n.Kind) {
				keep.add(n)
			}
			return nil
		})
	})
	return keep.page(), err
}

func (c *Client) eachNotice(ctx context.Context, subject string, since time.Time, fn func(StoredNotice) error) error {
	return c.eachStored(ctx, domain.NoticesStream, subject, since, "notices", func(data []byte, seq uint64) error {
		nt, err := domain.DecodeNotice(data)
		if err != nil {
			c.log.Warn("skipping a notice that does not decode", "seq", seq, "error", err)
			return nil
		}
		return fn(StoredNotice{Notice: nt, Seq: seq})
	})
}

// NoticeWatcher delivers lifecycle notices live.
type NoticeWatcher struct {
	it  jetstream.MessagesContext
	log *slog.Logger
	c   *Client
}

// WatchNotices starts watching lifecycle notices, as Watch does outcome events.
func (c *Client) WatchNotices(ctx context.Context, o WatchOptions) (*NoticeWatcher, error) {
	subject, err := noticeFilter(o.ResourceID)
	if err != nil {
		return nil, err
	}
	it, _, err := c.watchStream(ctx, domain.NoticesStream, subject, o.Since, "watch notices")
	if err != nil {
		return nil, err
	}
	return &NoticeWatcher{it: it, log: c.log, c: c}, nil
}

// Next waits for the next notice until ctx ends (returning ctx's error).
func (w *NoticeWatcher) Next(ctx context.Context) (StoredNotice, error) {
	var n StoredNotice
	err := w.c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		for {
			msg, err := w.it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return ErrWatchStopped
				}
				return fmt.Errorf("watch notices: %w", err)
			}
			nt, derr := domain.DecodeNotice(msg.Data())
			if derr != nil {
				w.log.Warn("skipping a notice that does not decode", "subject", msg.Subject(), "error", derr)
				continue
			}
			n = StoredNotice{Notice: nt}
			if md, err := msg.Metadata(); err == nil {
				n.Seq = md.Sequence.Stream
			}
			return nil
		}
	})
	return n, err
}

// Stop ends the watch.
func (w *NoticeWatcher) Stop() { w.it.Stop() }

// NoticeLead renders a reminder's lead for people, in days where whole ("14d", "1d12h",
// "90s" as "1m30s"); "-" for other kinds.
func NoticeLead(n domain.Notice) string {
	if n.Kind != domain.NoticeReminder {
		return "-"
	}
	return domain.FormatDays(time.Duration(n.Lead) * time.Second)
}
