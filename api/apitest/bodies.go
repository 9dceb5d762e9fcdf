package apitest

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Body pairs a Go type a handler decodes or encodes with the document's type
// for that body (package schema, generated from the document).
type Body struct {
	// Served is the handler's type; Schema the document's.
	Served, Schema reflect.Type
}

// BodyOf pairs the handler's type S with the document's type D.
func BodyOf[S, D any]() Body { return Body{reflect.TypeFor[S](), reflect.TypeFor[D]()} }

// Differences returns how the JSON of b.Served differs from the JSON of
// b.Schema: a field name at any depth that one has and the other has not, or
// a field that is a string in one and a number, boolean, array or object in
// the other. A free-form value (any, json.RawMessage, a map of values) on
// either side matches whatever the other has there.
func (b Body) Differences() []string {
	var out []string
	compare(b.Served, b.Schema, b.Served.String(), &out, map[[2]reflect.Type]bool{})
	return out
}

// The JSON kinds of Go types.
const (
	kindAny     = "any"
	kindString  = "string"
	kindNumber  = "number"
	kindBoolean = "boolean"
	kindArray   = "array"
	kindObject  = "object" // a struct: named fields
	kindMap     = "map"    // an object of any keys
)

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawType         = reflect.TypeFor[json.RawMessage]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	textMarshalType = reflect.TypeFor[encoding.TextMarshaler]()
)

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return kindString
	case t == rawType:
		return kindAny
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		return kindAny
	case t.Implements(textMarshalType) || reflect.PointerTo(t).Implements(textMarshalType):
		return kindString
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Bool:
		return kindBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return kindNumber
	case reflect.Slice, reflect.Array:
		return kindArray
	case reflect.Struct:
		return kindObject
	case reflect.Map:
		if jsonKind(t.Elem()) == kindAny {
			return kindAny
		}
		return kindMap
	default:
		return kindAny
	}
}

func compare(a, b reflect.Type, at string, out *[]string, seen map[[2]reflect.Type]bool) {
	for a.Kind() == reflect.Pointer {
		a = a.Elem()
	}
	for b.Kind() == reflect.Pointer {
		b = b.Elem()
	}
	if seen[[2]reflect.Type{a, b}] {
		return
	}
	seen[[2]reflect.Type{a, b}] = true
	ka, kb := jsonKind(a), jsonKind(b)
	objects := (ka == kindMap || ka == kindObject) && (kb == kindMap || kb == kindObject)
	switch {
	case ka == kindAny || kb == kindAny:
	case ka != kb && !objects:
		*out = append(*out, fmt.Sprintf("%s: %s (%s), the document has %s (%s)", at, ka, a, kb, b))
	case ka == kindArray:
		compare(a.Elem(), b.Elem(), at+"[]", out, seen)
	case ka == kindMap && kb == kindMap:
		compare(a.Elem(), b.Elem(), at+"{}", out, seen)
	case ka == kindObject && kb == kindObject:
		fa, fb := fields(a), fields(b)
		for _, name := range names(fa, fb) {
			ta, inA := fa[name]
			tb, inB := fb[name]
			switch {
			case !inB:
				*out = append(*out, fmt.Sprintf("%s.%s: not in the document", at, name))
			case !inA:
				*out = append(*out, fmt.Sprintf("%s.%s: in the document only", at, name))
			default:
				compare(ta, tb, at+"."+name, out, seen)
			}
		}
	}
}

func names(a, b map[string]reflect.Type) []string {
	var out []string
	for n := range a {
		out = append(out, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// fields returns the JSON fields of struct t by name, as encoding/json sees
// them: embedded structs' fields promoted, "-" and unexported ones left out.
func fields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for n, t := range fields(ft) {
				if _, ok := out[n]; !ok {
					out[n] = t
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
