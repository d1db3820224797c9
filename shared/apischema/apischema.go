// Package apischema writes the JSON Schema (2020-12, as OpenAPI 3.1 has it) of the Go types an
// API answers, from the types themselves and their json tags, so that the API's document
// cannot drift from what its handlers encode. A named struct becomes a component referred to
// by $ref; objects admit no property they do not name (a field added to a type and not to
// the document fails the document's validation). A type with a JSON encoding of its own
// (a json.Marshaler, time.Time) needs a schema given with Define: without one, Schema fails.
package apischema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Schema is a JSON Schema object.
type Schema = map[string]any

// Reflector builds the schemas of types and keeps the components they refer to.
type Reflector struct {
	// Components are the named schemas, by name (OpenAPI's components.schemas).
	Components map[string]Schema
	// RefPrefix is what a component's name follows in a $ref.
	RefPrefix string
	// Qualify prefixes the names of a package's types (by import path) with a word, unless a
	// name starts with it: two types of one name are an error, so their names stay the same
	// whatever order they are met in.
	Qualify map[string]string
	defined map[reflect.Type]Schema
	names   map[reflect.Type]string
	taken   map[string]reflect.Type
}

// New is a reflector whose components are referred to under prefix
// (e.g. "#/components/schemas/").
func New(prefix string) *Reflector {
	return &Reflector{Components: map[string]Schema{}, RefPrefix: prefix, Qualify: map[string]string{}, defined: map[reflect.Type]Schema{},
		names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
}

// Define gives the schema of the type of v (a value of it).
func (r *Reflector) Define(v any, s Schema) { r.defined[reflect.TypeOf(v)] = s }

// Ref is a reference to the component of the type of v, made if need be.
func (r *Reflector) Ref(v any) (Schema, error) { return r.schema(reflect.TypeOf(v)) }

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func (r *Reflector) schema(t reflect.Type) (Schema, error) {
	if s, ok := r.defined[t]; ok {
		return s, nil
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(marshaler)) {
		return nil, fmt.Errorf("%s encodes itself: Define its schema", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.schema(t.Elem())
	case reflect.Struct:
		if t.Name() == "" {
			return r.object(t)
		}
		return r.component(t)
	case reflect.Slice, reflect.Array:
		items, err := r.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return Schema{"type": "array", "items": items}, nil
	case reflect.Map:
		vals, err := r.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return Schema{"type": "object", "additionalProperties": vals}, nil
	}
	return scalar(t)
}

// scalar is the schema of a kind without parts.
func scalar(t reflect.Type) (Schema, error) {
	switch t.Kind() {
	case reflect.String:
		return Schema{"type": "string"}, nil
	case reflect.Bool:
		return Schema{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Schema{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}, nil
	}
	return nil, fmt.Errorf("%s: no schema for a %s", t, t.Kind())
}

// component makes t's component (once) and refers to it.
func (r *Reflector) component(t reflect.Type) (Schema, error) {
	name, ok := r.names[t]
	if !ok {
		name = t.Name()
		if q := r.Qualify[t.PkgPath()]; !strings.HasPrefix(name, q) {
			name = q + name
		}
		if other, taken := r.taken[name]; taken {
			return nil, fmt.Errorf("%s and %s are both named %s: Qualify one's package", t, other, name)
		}
		r.names[t], r.taken[name] = name, t
		r.Components[name] = nil // taken while it is built: a type may refer to itself
		obj, err := r.object(t)
		if err != nil {
			return nil, err
		}
		r.Components[name] = obj
	}
	return Schema{"$ref": r.RefPrefix + name}, nil
}

// object is the schema of a struct: its fields as json encodes them, embedded structs'
// fields among its own.
func (r *Reflector) object(t reflect.Type) (Schema, error) {
	props := Schema{}
	var required []string
	if err := r.fields(t, props, &required); err != nil {
		return nil, err
	}
	s := Schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

func (r *Reflector) fields(t reflect.Type, props Schema, required *[]string) error {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if err := r.fields(f.Type, props, required); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := r.field(f)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
	return nil
}

// field is a field's schema; a pointer that is not left out when nil may be null.
func (r *Reflector) field(f reflect.StructField) (Schema, error) {
	s, err := r.schema(f.Type)
	if err != nil {
		return nil, err
	}
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if f.Type.Kind() == reflect.Pointer && !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
		return Schema{"anyOf": []any{s, Schema{"type": "null"}}}, nil
	}
	return s, nil
}
