package function

import "fmt"

// NotNegative is the first check of a function's settings: an error wrapping invalid, naming
// the setting, when v is below zero. withDefaults of every function joins its checks with
// cmp.Or, which reports the first that fails, then fills zero settings with cmp.Or too.
func NotNegative[T ~int | ~int64 | ~float64](invalid error, name string, v T) error {
	if v < 0 {
		return fmt.Errorf("%w: %s must not be negative, got %v", invalid, name, v)
	}
	return nil
}
