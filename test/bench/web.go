package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// The web view at a fleet's scale: a web replica in a process of its own (so that its memory
// is its own, as a deployed replica's is) follows a bucket of n records served by a server in
// another; the bench requests the fleet page as a browser does, over loopback TCP, and times
// 50 direct reads of the bucket in the same run for comparison: what a page would cost that
// read its 50 rows from the bucket instead of from the replica's index.

// webPages are the requests timed: the first page, a page filtered by state and prefix (one
// subscription: 20 entities of the fleet), by state alone, and by a prefix every entity has
// (the most costly count).
var webPages = []struct{ name, query string }{
	{"first page", "/"},
	{"state and prefix", "/?state=Pending&prefix=%2Fsubscriptions%2F0000000a-1bf0-4dda-aec3-00000000000a"},
	{"state only", "/?state=Unplanned"},
	{"prefix of every entity", "/?prefix=%2Fsubscriptions%2F"},
}

// apiPages are the API's requests timed: a first page of the entities (100 records) unfiltered,
// then filtered by state (one entity in a hundred is Pending, spread over the key order).
var apiPages = []string{"/api/v1/entities", "/api/v1/entities?state=Pending"}

type webFigures struct {
	first, filtered, kvGet50 time.Duration
	api                      [2]time.Duration
	heap, rss                uint64
	n                        int
}

// benchWeb measures the fleet page at n entities with requests timed requests per page.
func benchWeb(ctx context.Context, n, requests int, out io.Writer) (webFigures, error) {
	f := webFigures{n: n}
	url, js, stop, err := filledServer(ctx, n)
	if err != nil {
		return f, err
	}
	defer stop()
	if err := announceWindows(ctx, js, n, 100); err != nil {
		return f, err
	}
	addr, load, err := startWebChild(ctx, url, &f)
	if err != nil {
		return f, err
	}
	fmt.Fprintf(out, "web view, %d entities: read in %.1f s; live heap %.0f MB, peak RSS %.0f MB (%.0f MB of heap per million entities)\n",
		n, load.Seconds(), mb(f.heap), mb(f.rss), mb(f.heap)*1e6/float64(n))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	for i, p := range webPages {
		p50, p99, err := timePage(ctx, hc, "http://"+addr+p.query, requests)
		if err != nil {
			return f, fmt.Errorf("web page %s: %w", p.name, err)
		}
		fmt.Fprintf(out, "web fleet page, %-22s p50 %6.1f ms, p99 %6.1f ms (%d warm requests)\n", p.name+":", ms(p50), ms(p99), requests)
		switch i {
		case 0:
			f.first = p99
		case 1:
			f.filtered = p99
		}
	}
	for i, q := range apiPages {
		p50, p99, err := timePage(ctx, hc, "http://"+addr+q, requests)
		if err != nil {
			return f, fmt.Errorf("api %s: %w", q, err)
		}
		fmt.Fprintf(out, "api first page, %-28s p50 %6.1f ms, p99 %6.1f ms (%d warm requests)\n", q+":", ms(p50), ms(p99), requests)
		f.api[i] = p99
	}
	p50, p99, err := timeKVGets(ctx, js, n, requests)
	if err != nil {
		return f, err
	}
	f.kvGet50 = p99
	fmt.Fprintf(out, "50 direct KV gets, one after another:  p50 %6.1f ms, p99 %6.1f ms\n", ms(p50), ms(p99))
	return f, nil
}

func (f webFigures) lines(out io.Writer) {
	fmt.Fprintf(out, "ms web_fleet_page_1m %.1f %.1f\n", ms(f.first), ms(f.filtered))
	fmt.Fprintf(out, "ms api_entities_1m %.1f %.1f\n", ms(f.api[0]), ms(f.api[1]))
	fmt.Fprintf(out, "ms kv_get_50 %.1f\n", ms(f.kvGet50))
	fmt.Fprintf(out, "mb web_heap_per_1m %.0f\n", mb(f.heap)*1e6/float64(f.n))
}

// announceWindows makes one entity in every of them Pending with a window, spread over the
// next 14 days: the time line has something to show.
func announceWindows(ctx context.Context, js jetstream.JetStream, n, every int) error {
	now := time.Now().UTC()
	for i := 0; i < n; i += every {
		start := now.Add(time.Duration(i%(14*24)) * time.Hour)
		r := domain.Record{ResourceID: entityID(i), State: domain.StatePending, Window: &domain.Window{Start: start, End: start.Add(4 * time.Hour)},
			StateSince: now, UpdatedAt: now, LastCommandID: "bench", LastCommandSeq: uint64(i + 1), Version: domain.RecordVersion}
		b, err := domain.EncodeRecord(r)
		if err != nil {
			return err
		}
		// A publish on a record's subject is a put of the record.
		if _, err := js.Publish(ctx, domain.RecordSubject(domain.MustKey(r.ResourceID)), b); err != nil {
			return err
		}
	}
	return nil
}

// startWebChild starts a web replica on the server at url and waits until it has read the
// bucket; it returns the replica's address and how long the read took, and fills f's memory.
func startWebChild(ctx context.Context, url string, f *webFigures) (string, time.Duration, error) {
	cmd, stdin, out, err := child(ctx, "web", "MAINT_BENCH_NATS="+url)
	if err != nil {
		return "", 0, err
	}
	go func() { <-ctx.Done(); stdin.Close() }()
	context.AfterFunc(ctx, func() { _ = cmd.Wait() })
	line, err := out.ReadString('\n')
	if err != nil {
		return "", 0, fmt.Errorf("web child: %w", err)
	}
	var addr string
	var secs float64
	if _, err := fmt.Sscan(line, &addr, &secs, &f.heap, &f.rss); err != nil {
		return "", 0, fmt.Errorf("web child said %q: %w", line, err)
	}
	return addr, time.Duration(secs * float64(time.Second)), nil
}

// webChild runs a web replica against MAINT_BENCH_NATS; once it has read the bucket it prints
// its address, the seconds that took, its live heap after a collection and its peak RSS, and
// serves until stdin closes.
func webChild() error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := nats.Connect(os.Getenv("MAINT_BENCH_NATS"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	v, err := web.New(js, web.Config{Listener: ln, Logger: slog.Default()})
	if err != nil {
		return err
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- v.Serve(ctx, ln) }()
	for !v.Loaded() {
		time.Sleep(10 * time.Millisecond)
	}
	load := time.Since(start)
	goruntime.GC()
	fmt.Println(ln.Addr().String(), load.Seconds(), heapObjects(), rssPeak())
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	cancel()
	return <-done
}

// timePage requests url warm-up times, then n times, and returns the median and the 99th
// percentile of the latter.
func timePage(ctx context.Context, hc *http.Client, url string, n int) (time.Duration, time.Duration, error) {
	get := func() (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Accept", "text/html")
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), err
	}
	return percentiles(n, get)
}

// timeKVGets times 50 gets of distinct keys, one after another, n times.
func timeKVGets(ctx context.Context, js jetstream.JetStream, entities, n int) (time.Duration, time.Duration, error) {
	st, err := store.Open(ctx, js)
	if err != nil {
		return 0, 0, err
	}
	round := 0
	return percentiles(n, func() (time.Duration, error) {
		start := time.Now()
		for i := range 50 {
			if _, _, err := st.Peek(ctx, domain.MustKey(entityID((round*50+i)*7919%entities))); err != nil {
				return 0, err
			}
		}
		round++
		return time.Since(start), nil
	})
}

// percentiles runs op n/10 times to warm up, then n times, and returns the median and the
// 99th percentile of the n.
func percentiles(n int, op func() (time.Duration, error)) (time.Duration, time.Duration, error) {
	for range max(n/10, 1) {
		if _, err := op(); err != nil {
			return 0, 0, err
		}
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		d, err := op()
		if err != nil {
			return 0, 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], nil
}
