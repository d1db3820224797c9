package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeStrict reads body, one JSON object of at most limit bytes, into v (a pointer to a
// struct) refusing what encoding/json would let through: a key unknown, given twice or cased
// otherwise than its field's tag, a value of another JSON type, a fraction or an out-of-range
// number for an integer, null for anything but a list or an object that may be absent.
// A rejection names the field at fault by its path ("waves[1].gate"); what names the document
// itself is what.
func DecodeStrict(body []byte, limit int, what string, v any) *Rejection {
	switch {
	case len(body) > limit:
		return &Rejection{Code: CodeInvalidRequestContent, Message: fmt.Sprintf("%s is %d bytes, at most %d", what, len(body), limit)}
	case !utf8.Valid(body):
		return &Rejection{Code: CodeInvalidRequestContent, Message: what + " is not valid UTF-8"}
	case !json.Valid(body):
		return &Rejection{Code: CodeInvalidRequestContent, Message: what + " is not JSON"}
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return &Rejection{Code: CodeInvalidRequestContent, Message: what + " is not a JSON object"}
	}
	w := walker{dec: json.NewDecoder(bytes.NewReader(body))}
	w.dec.UseNumber()
	if rej := w.value(reflect.TypeOf(v).Elem(), ""); rej != nil {
		return rej
	}
	if _, err := w.dec.Token(); !errors.Is(err, io.EOF) {
		return &Rejection{Code: CodeInvalidRequestContent, Message: what + " has data after the JSON object"}
	}
	if err := json.Unmarshal(body, v); err != nil { // the walk saw every value: not expected
		return InvalidParameter(what, "%v", err)
	}
	return nil
}

// DecodeKnown reads the JSON value b into v as encoding/json does, but refuses a key that no
// field of v names: for files an operator writes, where a misspelt key must not be ignored.
func DecodeKnown(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

type walker struct{ dec *json.Decoder }

func (w *walker) value(t reflect.Type, path string) *Rejection {
	tok, err := w.dec.Token()
	if err != nil {
		return InvalidParameter(path, "is not valid JSON")
	}
	if tok == nil {
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			return nil
		}
		return InvalidParameter(path, "must not be null")
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return w.typed(tok, t, path)
}

func (w *walker) typed(tok json.Token, t reflect.Type, path string) *Rejection {
	switch t.Kind() {
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return InvalidParameter(path, "must be a JSON string")
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return InvalidParameter(path, "must be true or false")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := tok.(json.Number)
		if !ok {
			return InvalidParameter(path, "must be a JSON number")
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			return InvalidParameter(path, "must be a whole number from %d to %d, got %s", math.MinInt32, math.MaxInt32, n)
		}
	case reflect.Struct:
		if tok != json.Delim('{') {
			return InvalidParameter(path, "must be a JSON object")
		}
		return w.object(t, path)
	case reflect.Slice:
		if tok != json.Delim('[') {
			return InvalidParameter(path, "must be a JSON array")
		}
		for i := 0; w.dec.More(); i++ {
			if rej := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); rej != nil {
				return rej
			}
		}
		_, _ = w.dec.Token() // ]
	}
	return nil
}

func (w *walker) object(t reflect.Type, path string) *Rejection {
	fields := fieldsOf(t)
	seen := make(map[string]bool, len(fields))
	for w.dec.More() {
		tok, err := w.dec.Token()
		key, _ := tok.(string)
		if err != nil {
			return InvalidParameter(path, "is not valid JSON")
		}
		at := join(path, key)
		ft, ok := fields[key]
		switch {
		case !ok:
			return InvalidParameter(at, "unknown field %q (fields: %s)", key, strings.Join(names(t), ", "))
		case seen[key]:
			return InvalidParameter(at, "field %q is given twice", key)
		}
		seen[key] = true
		if rej := w.value(ft, at); rej != nil {
			return rej
		}
	}
	_, _ = w.dec.Token() // }
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldsOf maps the JSON names of a struct's exported fields to their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" && name != "" {
			out[name] = f.Type
		}
	}
	return out
}

func names(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
