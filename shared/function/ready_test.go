package function_test

import (
	"context"
	"testing"

	"maintsignals/shared/function"
)

// A run under WithoutStatus reports nothing to the Status of its context: one that ends (a
// self-service subscription deleted) does not read as the process draining.
func TestWithoutStatus_ReportsNothing(t *testing.T) {
	s := function.NewStatus()
	ctx := function.WithStatus(context.Background(), s)
	function.ReportServing(function.WithoutStatus(ctx), "webhook", false, true)
	if got := s.Functions(); len(got) != 0 {
		t.Fatalf("reported %+v under WithoutStatus", got)
	}
	function.ReportServing(ctx, "webhook", true, false)
	if got := s.Functions(); len(got) != 1 || !got[0].Serving {
		t.Fatalf("reported %+v, want webhook serving", got)
	}
}
