package fault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// TestProcess_NoticesReplicasKilled runs two `maintctl function notices` processes on the
// 1 s tick while 40 announced windows run their ladders (6 s, 3 s), due and overdue, and
// kills one of them with SIGKILL every 1.5 s (starting it again at once), wherever it is: in
// the scan, between deciding and publishing, or after publishing. Every notice must be
// stored once, in ladder order, and every window must reach its overdue notice.
func TestProcess_NoticesReplicasKilled(t *testing.T) {
	needBinary(t)
	st := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := store.Open(ctx, st.js)
	if err != nil {
		t.Fatal(err)
	}
	const entities = 40
	now := time.Now()
	var lastEnd time.Time
	for i := range entities {
		start := now.Add(8*time.Second + time.Duration(i)*250*time.Millisecond)
		lastEnd = start.Add(4 * time.Second)
		rec := domain.Record{ResourceID: fmt.Sprintf("/fault/notices/c%d", i), State: domain.StatePending,
			Window: &domain.Window{Start: start, End: lastEnd}, StateSince: now, UpdatedAt: now, Version: domain.RecordVersion}
		if _, err := s.Put(ctx, domain.MustKey(rec.ResourceID), store.Versioned{}, rec); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string) *proc {
		p := startProc(t, name, procEnv(), "function", "notices", "--server", st.url, "--remind", "6s,3s", "--log-level", "debug")
		p.WaitFor("function started", 30*time.Second)
		return p
	}
	reps := []*proc{start("notices-0"), start("notices-1")}
	kills := 0
	for i := 0; time.Now().Before(lastEnd.Add(time.Second)); i++ {
		time.Sleep(1500 * time.Millisecond)
		v := i % 2
		reps[v].Kill()
		kills++
		reps[v] = startProc(t, fmt.Sprintf("notices-%d-%d", v, i), procEnv(), "function", "notices", "--server", st.url, "--remind", "6s,3s")
	}
	order := map[string]int{"reminder/6": 0, "reminder/3": 1, "due/0": 2, "overdue/0": 3}
	var (
		seen  map[string]bool
		per   map[string][]string
		twice []string
	)
	read := func() {
		seen, per, twice = map[string]bool{}, map[string][]string{}, nil
		testenv.ReadNotices(t, st.js, func(m jetstream.Msg) {
			n, err := domain.DecodeNotice(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			if seen[n.NoticeID] {
				twice = append(twice, n.NoticeID)
			}
			seen[n.NoticeID] = true
			per[n.ResourceID] = append(per[n.ResourceID], fmt.Sprintf("%s/%d", n.Kind, n.Lead))
		})
	}
	// More ticks, undisturbed, for the last overdue notices.
	testenv.Eventually(t, 30*time.Second, "every window's overdue notice", func() bool {
		read()
		for i := range entities {
			if got := per[fmt.Sprintf("/fault/notices/c%d", i)]; len(got) == 0 || got[len(got)-1] != "overdue/0" {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // ticks that would send a notice again
	read()
	for _, id := range twice {
		t.Errorf("notice %s stored twice", id)
	}
	complete := 0
	for i := range entities {
		id := fmt.Sprintf("/fault/notices/c%d", i)
		got := per[id]
		prev := -1
		for _, k := range got {
			o, ok := order[k]
			if !ok || o <= prev {
				t.Errorf("%s: notices %v out of ladder order", id, got)
				break
			}
			prev = o
		}
		if len(got) == 0 || got[len(got)-1] != "overdue/0" {
			t.Errorf("%s: notices %v, want the last to be overdue/0", id, got)
		}
		if len(got) == 4 {
			complete++
		}
	}
	t.Logf("%d SIGKILLs; %d notices; %d of %d windows got every stage (a stage whose ticks all fell in a kill is skipped: only the latest stage is ever sent)",
		kills, len(seen), complete, entities)
	if kills < 5 {
		t.Errorf("only %d kills", kills)
	}
}
