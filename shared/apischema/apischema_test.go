package apischema_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/apischema"
)

type inner struct {
	A string `json:"a"`
}

type outer struct {
	inner
	N    int       `json:"n"`
	Opt  string    `json:"opt,omitempty"`
	Ptr  *inner    `json:"ptr"`
	When time.Time `json:"when,omitzero"`
	Tags []string  `json:"tags"`
	skip int
	Gone int `json:"-"`
}

type selfEncoding struct{}

func (selfEncoding) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

func TestReflector_WritesTheSchemaJSONEncodes(t *testing.T) {
	r := apischema.New("#/c/")
	r.Define(time.Time{}, apischema.Schema{"type": "string", "format": "date-time"})
	ref, err := r.Ref(outer{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(r.Components["outer"])
	want := `{"additionalProperties":false,"properties":{"a":{"type":"string"},"n":{"type":"integer"},"opt":{"type":"string"},` +
		`"ptr":{"anyOf":[{"$ref":"#/c/inner"},{"type":"null"}]},"tags":{"items":{"type":"string"},"type":"array"},` +
		`"when":{"format":"date-time","type":"string"}},"required":["a","n","ptr","tags"],"type":"object"}`
	if !reflect.DeepEqual(ref, apischema.Schema{"$ref": "#/c/outer"}) || string(got) != want {
		t.Errorf("ref %v, schema\n%s\nwant\n%s", ref, got, want)
	}
}

func TestReflector_RefusesWhatItCannotSee(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"a type that encodes itself", struct{ S selfEncoding }{}, "encodes itself"},
		{"a channel", struct{ C chan int }{}, "no schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := apischema.New("#/c/").Ref(tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

type Twin struct{ A int }

func TestReflector_RefusesTwoTypesOfOneName(t *testing.T) {
	r := apischema.New("#/c/")
	if _, err := r.Ref(Twin{}); err != nil {
		t.Fatal(err)
	}
	type Twin struct{ B int }
	if _, err := r.Ref(Twin{}); err == nil {
		t.Error("a second type named Twin was taken")
	}
}
