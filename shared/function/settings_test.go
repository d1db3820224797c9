package function_test

import (
	"errors"
	"testing"
	"time"

	"maintsignals/shared/function"
)

func TestNotNegative_NamesTheSettingBelowZero(t *testing.T) {
	invalid := errors.New("invalid config")
	tests := []struct {
		name string
		err  error
		want string // "" when the value is accepted
	}{
		{name: "a negative duration, as a duration", err: function.NotNegative(invalid, "Tick", -time.Second), want: "invalid config: Tick must not be negative, got -1s"},
		{name: "a negative count", err: function.NotNegative(invalid, "BatchSize", -3), want: "invalid config: BatchSize must not be negative, got -3"},
		{name: "zero takes the default", err: function.NotNegative(invalid, "Tick", time.Duration(0))},
		{name: "a positive value", err: function.NotNegative(invalid, "EntityRate", 0.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if tt.err != nil {
					t.Fatalf("err = %v, want none", tt.err)
				}
				return
			}
			if !errors.Is(tt.err, invalid) || tt.err.Error() != tt.want {
				t.Fatalf("err = %v, want %q wrapping the sentinel", tt.err, tt.want)
			}
		})
	}
}
