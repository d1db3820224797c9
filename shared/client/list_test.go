package client_test

import (
	"context"
	"strings"
	"testing"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// TestList_FiltersSortsAndCountsWhatDoesNotDecode: a listing of one state keeps only its
// entities, sorted by resource ID whatever their casing; a record that does not decode is
// counted and skipped, not an error that hides the fleet.
func TestList_FiltersSortsAndCountsWhatDoesNotDecode(t *testing.T) {
	env := testenv.Start(t)
	for _, r := range []domain.Record{
		{ResourceID: "/e/b", State: domain.StatePending},
		{ResourceID: "/e/A", State: domain.StatePending},
		{ResourceID: "/e/c", State: domain.StateUnplanned},
	} {
		b, err := domain.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		testenv.PutRawRecord(t, env.JS, domain.MustKey(r.ResourceID), b)
	}
	testenv.PutRawRecord(t, env.JS, domain.MustKey("/e/broken"), []byte("{not json"))
	c, err := client.New(testenv.Connect(t, env.Server), quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		state domain.State
		want  string
	}{{"", "/e/A /e/b /e/c"}, {domain.StatePending, "/e/A /e/b"}, {domain.StatePlanned, ""}} {
		l, err := c.List(context.Background(), tc.state)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.state, err)
		}
		var ids []string
		for _, e := range l.Entities {
			ids = append(ids, e.Record.ResourceID)
		}
		if got := strings.Join(ids, " "); got != tc.want || l.Corrupt != 1 {
			t.Errorf("List(%q) = %q with %d corrupt, want %q with 1", tc.state, got, l.Corrupt, tc.want)
		}
	}
}
