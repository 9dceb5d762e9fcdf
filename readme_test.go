// Package remoteagents_test checks the repository as a whole: the
// configuration reference (docs/configuration.md) is what shared/config's
// table generates, the table names every RA_* variable the code reads or sets
// and no other, docs/architecture.md lists every end reason and docs/api.md
// every route, every test the documentation cites exists, every relative link
// resolves, and every command of README.md and docs/ is a make target or run
// by a test (docs_test.go).
package remoteagents_test

import (
	"cmp"
	"flag"
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

	"github.com/remote-agents/remote-agents/shared/config"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from shared/config's table")

var variable = regexp.MustCompile(`\bRA_[A-Z0-9_]+`)

// The table itself names every variable: it is not the code that reads them.
var tableFiles = []string{filepath.Join("shared", "config", "variables.go"), filepath.Join("shared", "config", "reference.go")}

// TestConfigurationReference fails when docs/configuration.md is not what
// shared/config's table generates; -update rewrites it (make docs).
func TestConfigurationReference(t *testing.T) {
	const path = "docs/configuration.md"
	want := config.Markdown()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from what shared/config's table generates: run make docs", path)
	}
}

// TestConfigTableNamesEveryVariable fails when a string literal of the
// module's code, the CDK app's or the tools' (not their tests) names an RA_* variable that shared/config's
// table lacks, and when the table lists a variable neither config.Parse
// reads nor any other Go file of the module (tests included) names.
func TestConfigTableNamesEveryVariable(t *testing.T) {
	documented, parsed := map[string]bool{}, map[string]bool{}
	for _, v := range config.Variables {
		documented[v.Name], parsed[v.Name] = true, v.Parsed()
	}
	code, tests := moduleVariables(t, ".")
	// The CDK app and the tools are modules of their own, whose variables
	// are the platform's too (the stack sets the functions' environment).
	for _, nested := range []string{"infra", filepath.Join("localstack", "tools")} {
		c, ts := moduleVariables(t, nested)
		for name, path := range c {
			code[name] = cmp.Or(code[name], path)
		}
		for name, path := range ts {
			tests[name] = cmp.Or(tests[name], path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if strings.HasSuffix(name, "_") && slices.ContainsFunc(slices.Collect(maps.Keys(documented)), func(d string) bool { return strings.HasPrefix(d, name) }) {
			continue // a prefix the code completes (RA_MODEL_SECRET_ + provider)
		}
		if !documented[name] {
			t.Errorf("%s (%s) is not in shared/config's table of variables (variables.go)", name, code[name])
		}
	}
	for name := range documented {
		if strings.HasPrefix(name, "RA_") && !parsed[name] && code[name] == "" && tests[name] == "" {
			t.Errorf("shared/config's table lists %s, which no Go file names", name)
		}
	}
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
		if !strings.HasSuffix(path, ".go") || slices.Contains(tableFiles, path) {
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
