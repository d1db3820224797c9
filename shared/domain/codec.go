package domain

import (
	"encoding/json"
	"fmt"
)

// encodeJSON marshals one of the documents of the contract; what names it in the error.
func encodeJSON(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return b, nil
}

// decodeJSON unmarshals one of the documents of the contract; what names it in the error.
func decodeJSON[T any](what string, b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("decode %s: %w", what, err)
	}
	return v, nil
}
