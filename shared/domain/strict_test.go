package domain_test

import (
	"strings"
	"testing"

	"maintsignals/shared/domain"
)

func TestDecodeKnown_RefusesAKeyNoFieldNames(t *testing.T) {
	var v []struct {
		Name string `json:"name"`
	}
	if err := domain.DecodeKnown([]byte(`[{"name":"a"}]`), &v); err != nil || len(v) != 1 || v[0].Name != "a" {
		t.Fatalf("%v %v", v, err)
	}
	if err := domain.DecodeKnown([]byte(`[{"name":"a","nmae":"b"}]`), &v); err == nil || !strings.Contains(err.Error(), `unknown field "nmae"`) {
		t.Errorf("misspelt key: %v", err)
	}
}
