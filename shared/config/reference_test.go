package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestVariablesAreWellFormed: each variable once, with a reader, a default
// and a meaning; each key once, overridden by a variable of the table.
func TestVariablesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Variables {
		if seen[v.Name] {
			t.Errorf("%s is in the table twice", v.Name)
		}
		seen[v.Name] = true
		if len(v.Readers) == 0 || v.Default == "" || v.Meaning == "" {
			t.Errorf("%s needs a reader, a default and a meaning: %+v", v.Name, v)
		}
		if strings.Contains(v.Default+v.Meaning, "|") {
			t.Errorf("%s: a | would break the reference's table", v.Name)
		}
	}
	keys := map[string]bool{}
	for _, k := range Keys {
		if keys[k.Path] {
			t.Errorf("%s is in the table twice", k.Path)
		}
		keys[k.Path] = true
		if !seen[k.Variable] {
			t.Errorf("%s: its variable %s is not in the table of variables", k.Path, k.Variable)
		}
	}
}

// TestPlatformVariablesAreWhatParseReads: the rows Parse reads (those with a
// setter) are exactly the table's platform rows, but RA_CONFIG, which Load
// reads.
func TestPlatformVariablesAreWhatParseReads(t *testing.T) {
	var table []string
	for _, v := range Variables {
		if v.Readers[0] == PlatformFunctions && v.Name != "RA_CONFIG" {
			table = append(table, v.Name)
		}
	}
	var parsed []string
	for _, e := range envVars {
		parsed = append(parsed, e.Name)
	}
	slices.Sort(table)
	slices.Sort(parsed)
	if !slices.Equal(table, parsed) {
		t.Errorf("the table's platform variables differ from what Parse reads:\ntable: %v\nParse: %v", table, parsed)
	}
}

// TestVariableValuesAreTheDefaults: a variable set to the default the table
// documents changes nothing.
func TestVariableValuesAreTheDefaults(t *testing.T) {
	want, err := Parse("", nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range Variables {
		if v.Value == "" {
			continue
		}
		n++
		got, err := Parse("", nil, func(name string) (string, bool) {
			if name == v.Name {
				return v.Value, true
			}
			return "", false
		})
		if err != nil {
			t.Errorf("%s=%s: %v", v.Name, v.Value, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s is not the default:\n got %+v\nwant %+v", v.Name, v.Value, got, want)
		}
	}
	if n == 0 {
		t.Fatal("no variable has a Value")
	}
}

// TestKeysAreTheFileSection: the table's keys are exactly those the file's
// remote_agents section takes, and each set to its documented default
// changes nothing.
func TestKeysAreTheFileSection(t *testing.T) {
	var accepted []string
	yamlPaths(reflect.TypeFor[section](), "remote_agents", &accepted)
	var table []string
	for _, k := range Keys {
		table = append(table, k.Path)
	}
	slices.Sort(accepted)
	slices.Sort(table)
	if !slices.Equal(accepted, table) {
		t.Errorf("the table's keys differ from the file's:\ntable: %v\nfile:  %v", table, accepted)
	}
	want, err := Parse("", nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys {
		var doc strings.Builder
		parts := strings.Split(k.Path, ".")
		for i, p := range parts {
			doc.WriteString(strings.Repeat("  ", i) + p + ":")
			if i == len(parts)-1 {
				doc.WriteString(" " + k.Default)
			}
			doc.WriteString("\n")
		}
		got, err := Parse("config.yaml", []byte(doc.String()), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Errorf("%s: %v\n%s", k.Path, err, doc.String())
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s is not the default:\n got %+v\nwant %+v", k.Path, k.Default, got, want)
		}
	}
}

// yamlPaths appends the dotted yaml paths of t's leaves under prefix.
func yamlPaths(t reflect.Type, prefix string, into *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		*into = append(*into, prefix)
		return
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		yamlPaths(f.Type, prefix+"."+name, into)
	}
}
