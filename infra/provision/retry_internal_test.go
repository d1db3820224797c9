package provision

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestMergeReports_KeepsWhatAnEarlierPassDid(t *testing.T) {
	first := Report{
		{Kind: "stream", Name: "A", Action: Created},
		{Kind: "stream", Name: "B", Action: Failed, Err: context.DeadlineExceeded},
	}
	second := Report{
		{Kind: "stream", Name: "A", Action: Unchanged},
		{Kind: "stream", Name: "B", Action: Created},
		{Kind: "consumer", Name: "A/c", Action: Created},
	}
	var got []string
	for _, ch := range mergeReports(mergeReports(nil, first), second) {
		got = append(got, ch.Kind+" "+ch.Name+" "+string(ch.Action))
	}
	if s := strings.Join(got, ", "); s != "stream A created, stream B created, consumer A/c created" {
		t.Errorf("merged = %s", s)
	}
	if !transient(fmt.Errorf("stream X: %w", context.DeadlineExceeded)) || transient(ErrInvalidConfig) {
		t.Error("transient misjudges a timeout or a configuration error")
	}
}
