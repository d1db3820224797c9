package client

import (
	"context"
	"slices"
	"time"

	"maintsignals/shared/domain"
)

// StoredNotice is a lifecycle notice with where it sits in MAINT_NOTICES.
type StoredNotice struct {
	domain.Notice
	Seq uint64 `json:"-"`
}

// Notices returns every lifecycle notice of resourceID ("" for every entity) kept in
// MAINT_NOTICES, oldest first.
func (c *Client) Notices(ctx context.Context, resourceID string) ([]domain.Notice, error) {
	srcs, err := c.noticeSources(resourceID)
	if err != nil {
		return nil, err
	}
	var out []domain.Notice
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		out = nil
		return c.eachNotice(ctx, srcs, time.Time{}, func(n StoredNotice) error {
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
	srcs, err := c.noticeSources(f.ResourceID)
	if err != nil {
		return Page[StoredNotice]{}, err
	}
	keep := newest[StoredNotice]{limit: f.Limit}
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		keep = newest[StoredNotice]{limit: f.Limit}
		return c.eachNotice(ctx, srcs, f.Since, func(n StoredNotice) error {
			if len(f.Kinds) == 0 || slices.Contains(f.Kinds, n.Kind) {
				keep.add(n)
			}
			return nil
		})
	})
	return keep.page(), err
}

func (c *Client) eachNotice(ctx context.Context, srcs []source, since time.Time, fn func(StoredNotice) error) error {
	return c.eachStoredIn(ctx, srcs, since, "notices", func(data []byte, seq uint64) error {
		nt, err := domain.DecodeNotice(data)
		if err != nil {
			c.log.Warn("skipping a notice that does not decode", "seq", seq, "error", err)
			return nil
		}
		return fn(StoredNotice{Notice: nt, Seq: seq})
	})
}

// NoticeWatcher delivers lifecycle notices live: a Timeline of the notices alone.
type NoticeWatcher struct{ t *Timeline }

// WatchNotices starts watching lifecycle notices, as Watch does outcome events.
func (c *Client) WatchNotices(ctx context.Context, o WatchOptions) (*NoticeWatcher, error) {
	srcs, err := c.noticeSources(o.ResourceID)
	if err != nil {
		return nil, err
	}
	t, err := c.timeline(ctx, TimelineOptions{ResourceID: o.ResourceID, Since: o.Since}, decoding(srcs, decodeNoticeItem))
	if err != nil {
		return nil, err
	}
	return &NoticeWatcher{t: t}, nil
}

// Next waits for the next notice until ctx ends (returning ctx's error).
func (w *NoticeWatcher) Next(ctx context.Context) (StoredNotice, error) {
	it, err := w.t.Next(ctx)
	if err != nil {
		return StoredNotice{}, err
	}
	return *it.Notice, nil
}

// Stop ends the watch.
func (w *NoticeWatcher) Stop() { w.t.Stop() }

// NoticeLead renders a reminder's lead for people, in days where whole ("14d", "1d12h",
// "90s" as "1m30s"); "-" for other kinds.
func NoticeLead(n domain.Notice) string {
	if n.Kind != domain.NoticeReminder {
		return "-"
	}
	return domain.FormatDays(time.Duration(n.Lead) * time.Second)
}
