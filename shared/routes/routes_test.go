package routes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every folder under functions/ is a function of the table, and back.
func TestFunctionsMatchTheFunctionsFolder(t *testing.T) {
	entries, err := os.ReadDir("../../functions")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("../../functions", e.Name(), "main.go")); err == nil {
			dirs = append(dirs, e.Name())
		}
	}
	fns := Functions()
	slices.Sort(dirs)
	slices.Sort(fns)
	if !slices.Equal(dirs, fns) {
		t.Errorf("functions/ holds %v, the route table names %v", dirs, fns)
	}
	seen := map[string]bool{}
	for _, r := range All() {
		if seen[r.Key()] {
			t.Errorf("route %s twice", r.Key())
		}
		seen[r.Key()] = true
	}
}
