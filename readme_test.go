// Package remoteagents_test checks the repository as a whole: README.md
// documents every RA_* variable the code reads or sets.
package remoteagents_test

import (
	"bufio"
	"go/scanner"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var variable = regexp.MustCompile(`\bRA_[A-Z0-9_]+`)

// TestReadmeDocumentsEveryVariable fails when a string literal of the module's
// code (not its tests) names an RA_* variable that README.md's table of
// variables lacks, and when the table documents a variable no Go file of the
// module (tests included) names.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	documented := readmeVariables(t, "README.md")
	code, tests := moduleVariables(t, ".")
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if !documented[name] {
			t.Errorf("%s (%s) is not in README.md's table of variables", name, code[name])
		}
	}
	for name := range documented {
		if code[name] == "" && tests[name] == "" {
			t.Errorf("README.md documents %s, which no Go file names", name)
		}
	}
}

// readmeVariables returns the variables of the rows of the tables in path's
// Configuration section: rows whose first cell is one `RA_…` name.
func readmeVariables(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	row := regexp.MustCompile("^\\| `(RA_[A-Z0-9_]+)` \\|")
	names := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Configuration"
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			if names[m[1]] {
				t.Errorf("README.md documents %s twice", m[1])
			}
			names[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("README.md's Configuration section has no table of variables")
	}
	return names
}

// moduleVariables returns the RA_* names in the string literals of the
// module's Go files under root, each with a file that names it: those of the
// code, and those of the tests. Nested modules, caches and node_modules are
// not the module's.
func moduleVariables(t *testing.T, root string) (code, tests map[string]string) {
	t.Helper()
	code, tests = map[string]string{}, map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			switch d.Name() {
			case ".git", ".cache", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		into := code
		if strings.HasSuffix(path, "_test.go") {
			into = tests
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range literalVariables(src) {
			if into[name] == "" {
				into[name] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(code) == 0 {
		t.Fatal("no RA_* variable found in the module: is the walk rooted at the module?")
	}
	return code, tests
}

// literalVariables returns the RA_* names in src's string literals.
func literalVariables(src []byte) []string {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", fset.Base(), len(src)), src, nil, 0)
	var names []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return names
		}
		if tok != token.STRING {
			continue
		}
		if v, err := strconv.Unquote(lit); err == nil {
			names = append(names, variable.FindAllString(v, -1)...)
		}
	}
}

func TestLiteralVariables(t *testing.T) {
	src := []byte("package p\n// \"RA_IN_COMMENT\"\nconst a, b = \"RA_ONE\", `RA_RAW`\nvar c = \"RA_TWO=\" + x + \"set RA_THREE, not XRA_FOUR or RA_*\"\n")
	got := literalVariables(src)
	if want := []string{"RA_ONE", "RA_RAW", "RA_TWO", "RA_THREE"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
