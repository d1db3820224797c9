package function_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

func TestCoalesce_ShardsOfOneTickArrivingTogetherRunOnce(t *testing.T) {
	var (
		mu   sync.Mutex
		runs [][]int
	)
	c := &function.Coalesce[int]{Window: 100 * time.Millisecond, Run: func(_ context.Context, _ time.Time, shards []domain.Shard) []int {
		mu.Lock()
		defer mu.Unlock()
		var idx, out []int
		for _, s := range shards {
			idx = append(idx, s.Index)
			out = append(out, s.Index*10)
		}
		runs = append(runs, idx)
		return out
	}}
	var wg sync.WaitGroup
	results := make([]int, 4)
	for s := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Do(context.Background(), 7, time.Time{}, domain.Shard{Index: s, Of: 4})
			if err != nil {
				t.Error(err)
			}
			results[s] = r
		}()
	}
	wg.Wait()
	// A shard of the same tick that comes after the run started runs on its own.
	r, err := c.Do(context.Background(), 7, time.Time{}, domain.Shard{Index: 3, Of: 4})
	if err != nil {
		t.Fatal(err)
	}
	results[3] = r
	if !slices.Equal(results, []int{0, 10, 20, 30}) {
		t.Errorf("results %v, want each shard its own", results)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || len(runs[0]) != 3 || !slices.Equal(runs[1], []int{3}) {
		t.Errorf("runs %v, want shards 0-2 together, then 3 alone", runs)
	}
}

func TestCoalesce_RunEndsWhenEveryCallerHasGivenUp(t *testing.T) {
	ended := make(chan struct{})
	c := &function.Coalesce[int]{Window: 10 * time.Millisecond, Run: func(ctx context.Context, _ time.Time, shards []domain.Shard) []int {
		<-ctx.Done()
		close(ended)
		return make([]int, len(shards))
	}}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := c.Do(ctx1, 1, time.Time{}, domain.Shard{Index: 0, Of: 2}); errs <- err }()
	go func() { _, err := c.Do(ctx2, 1, time.Time{}, domain.Shard{Index: 1, Of: 2}); errs <- err }()
	time.Sleep(50 * time.Millisecond)
	cancel1()
	if err := <-errs; err == nil {
		t.Error("a caller whose context ended got no error")
	}
	select {
	case <-ended:
		t.Fatal("the run ended while a caller still waited")
	case <-time.After(50 * time.Millisecond):
	}
	cancel2()
	<-errs
	select {
	case <-ended:
	case <-time.After(time.Second):
		t.Fatal("the run goes on after every caller gave up")
	}
}
