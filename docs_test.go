package remoteagents_test

import (
	"bufio"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// docFiles are the documentation pages the checks below read.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// TestArchitectureListsEveryEndReason fails when a Reason… constant of the
// platform (shared/…: a session's end reasons) is not in docs/architecture.md,
// as `value`.
func TestArchitectureListsEveryEndReason(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	err = filepath.WalkDir("shared", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						reasons[v] = path + ": " + name.Name
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) < 14 {
		t.Fatalf("found %d end reasons in shared/, want at least 14: %v", len(reasons), reasons)
	}
	for v, where := range reasons {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("docs/architecture.md does not list the end reason `%s` (%s)", v, where)
		}
	}
}

// TestDocsCiteTestsThatExist fails when README.md or a page of docs/ names a
// Test…, Benchmark… or Fuzz… function that no test file of the repository
// declares.
func TestDocsCiteTestsThatExist(t *testing.T) {
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".cache" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			declared[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`(?:[a-z0-9]+\\.)?((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)")
	for _, page := range docFiles(t) {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllSubmatch(src, -1) {
			if !declared[string(m[1])] {
				t.Errorf("%s cites %s, which no test file declares", page, m[1])
			}
		}
	}
}

// needsAWS are the documented commands no test can run: they act on an AWS
// account with the reader's credentials. Each says why.
var needsAWS = map[string]string{
	"cd infra && npx cdk bootstrap": "bootstraps the reader's AWS account for the CDK",
	`aws secretsmanager put-secret-value --secret-id ra-dev-model-anthropic --secret-string "$ANTHROPIC_API_KEY"`: "writes the reader's key into the deployed stack's secret",
}

// runBy marks a fenced block that a test runs: <!-- run by TestX in dir -->
// on the line before it. The test finds the block by its own name.
var runBy = regexp.MustCompile(`^<!-- run by (Test[A-Za-z0-9_]+) in ([a-z0-9/]+) -->$`)

// TestDocsCommandsAreRun fails when a command of a ```sh or ```bash block of
// README.md or docs/ is neither a target of the Makefile (make <target>
// [VAR=value…], chained with &&), nor in a block a test runs (marked
// <!-- run by TestX in dir --> on the line before, the test declared in that
// directory and naming the page), nor one of needsAWS.
func TestDocsCommandsAreRun(t *testing.T) {
	targets := makeTargets(t)
	for _, page := range docFiles(t) {
		for _, b := range shellBlocks(t, page) {
			if b.runBy != nil {
				checkRunBy(t, page, b)
				continue
			}
			for _, cmd := range b.commands {
				if _, ok := needsAWS[cmd]; ok {
					continue
				}
				if err := checkMake(cmd, targets); err != "" {
					t.Errorf("%s:%d: %q: %s; mark the block <!-- run by TestX in dir --> and run it in a test, or make it a make target", page, b.line, cmd, err)
				}
			}
		}
	}
}

// block is a fenced shell block: the line it starts on, its commands (lines
// joined at a trailing backslash, without comments) and its run-by mark.
type block struct {
	line     int
	commands []string
	runBy    []string
}

func shellBlocks(t *testing.T, page string) []block {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var (
		blocks  []block
		cur     *block
		fenced  bool
		prev    string
		pending string
		n       int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !fenced && strings.HasPrefix(trimmed, "```"):
			fenced = true
			if lang := strings.TrimPrefix(trimmed, "```"); lang == "sh" || lang == "bash" {
				cur = &block{line: n}
				if m := runBy.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
					cur.runBy = m[1:]
				}
			}
		case fenced && trimmed == "```":
			fenced = false
			if cur != nil {
				blocks = append(blocks, *cur)
				cur = nil
			}
		case cur != nil:
			if c, _, _ := strings.Cut(trimmed, " #"); !strings.HasPrefix(trimmed, "#") {
				trimmed = strings.TrimSpace(c)
			} else {
				trimmed = ""
			}
			if strings.HasSuffix(trimmed, "\\") {
				pending += strings.TrimSuffix(trimmed, "\\") + " "
				continue
			}
			if cmd := strings.TrimSpace(pending + trimmed); cmd != "" {
				cur.commands = append(cur.commands, cmd)
			}
			pending = ""
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// checkRunBy: the test the mark names is declared in its directory and names
// the page it runs a block of.
func checkRunBy(t *testing.T, page string, b block) {
	t.Helper()
	name, dir := b.runBy[0], b.runBy[1]
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "func "+name+"(") {
			if !strings.Contains(string(src), strconv.Quote(filepath.ToSlash(page))) {
				t.Errorf("%s:%d: %s (%s) runs no block of %q", page, b.line, name, file, page)
			}
			return
		}
	}
	t.Errorf("%s:%d: the block is marked run by %s in %s, which has no such test", page, b.line, name, dir)
}

// checkMake says what is wrong with cmd as make targets, or "".
func checkMake(cmd string, targets map[string]bool) string {
	for part := range strings.SplitSeq(cmd, "&&") {
		fields := strings.Fields(part)
		if len(fields) < 2 || fields[0] != "make" {
			return "not a make target"
		}
		for _, f := range fields[1:] {
			if strings.Contains(f, "=") {
				continue
			}
			if !targets[f] {
				return "the Makefile has no target " + f
			}
		}
	}
	return ""
}

// makeTargets are the Makefile's targets (rules whose name is a plain word).
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	rule := regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
	for _, m := range rule.FindAllStringSubmatch(string(src), -1) {
		targets[m[1]] = true
	}
	if !targets["test"] || !targets["dev"] {
		t.Fatalf("no test or dev target among %v", slices.Sorted(func(yield func(string) bool) {
			for k := range targets {
				if !yield(k) {
					return
				}
			}
		}))
	}
	return targets
}

func TestCheckMake(t *testing.T) {
	targets := map[string]bool{"dev": true, "deploy": true, "localstack-up": true}
	for _, tc := range []struct {
		cmd  string
		want bool
	}{
		{"make dev", true},
		{"make deploy ENV=prod", true},
		{"make localstack-up && make deploy", true},
		{"make nothing", false},
		{"curl -s http://127.0.0.1:8080/", false},
		{"make dev && curl x", false},
	} {
		if got := checkMake(tc.cmd, targets) == ""; got != tc.want {
			t.Errorf("checkMake(%q) ok = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

// TestAPIPageListsEveryRoute fails when a route of shared/routes is not in
// docs/api.md as `METHOD path`.
func TestAPIPageListsEveryRoute(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes.All() {
		if !strings.Contains(string(doc), "`"+r.Key()+"`") {
			t.Errorf("docs/api.md does not list `%s`", r.Key())
		}
	}
}

// TestReadmeSettingsAreInTheTable fails when README.md's table of make dev's
// settings names a variable shared/config's table lacks.
func TestReadmeSettingsAreInTheTable(t *testing.T) {
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, v := range config.Variables {
		known[v.Name] = true
	}
	row := regexp.MustCompile("(?m)^\\| `(RA_[A-Z0-9_]+)` \\|")
	rows := row.FindAllStringSubmatch(string(src), -1)
	if len(rows) < 8 {
		t.Fatalf("README.md's table of make dev's settings has %d rows, want the 8 public ones", len(rows))
	}
	for _, m := range rows {
		if !known[m[1]] {
			t.Errorf("README.md documents %s, which shared/config's table lacks", m[1])
		}
	}
}

// TestDocsLinksResolve fails when a relative link of README.md or docs/
// names a file that does not exist, or a heading its page does not have, and
// when README.md links outside the repository.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range docFiles(t) {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(src), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				if page == "README.md" {
					t.Errorf("README.md links outside the repository: %s", target)
				}
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if rel, err := filepath.Rel(".", path); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links outside the repository: %s", page, target)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(headingSlugs(t, path), anchor) {
				t.Errorf("%s links to %s, whose page has no such heading", page, target)
			}
		}
	}
}

// headingSlugs are the anchors GitHub gives the headings of a Markdown page.
func headingSlugs(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	fenced := false
	for line := range strings.SplitSeq(string(src), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		slugs = append(slugs, b.String())
	}
	return slugs
}

// The generated part of docs/api.md: its table of error codes.
const (
	errorCodesBegin = "<!-- error codes: generated from shared/apierror and httpapi's statuses by TestAPIErrorCodes (make docs) -->\n"
	errorCodesEnd   = "<!-- end of error codes -->\n"
)

// TestAPIErrorCodes fails when docs/api.md's table of error codes is not what
// shared/apierror's codes and httpapi's one table of statuses make; -update
// rewrites it (make docs).
func TestAPIErrorCodes(t *testing.T) {
	const path = "docs/api.md"
	var codes []apierror.Code
	files, err := filepath.Glob(filepath.Join("shared", "apierror", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						codes = append(codes, apierror.Code(s))
					}
				}
			}
		}
	}
	if len(codes) < 20 {
		t.Fatalf("found %d error codes in shared/apierror", len(codes))
	}
	slices.SortFunc(codes, func(a, b apierror.Code) int {
		return cmp.Or(cmp.Compare(httpapi.Status(a), httpapi.Status(b)), cmp.Compare(a, b))
	})
	var table strings.Builder
	table.WriteString(errorCodesBegin + "| `error_code` | Status | `retryable` |\n|---|---|---|\n")
	for _, c := range codes {
		env := httpapi.EnvelopeOf(apierror.New(c, "x"))
		fmt.Fprintf(&table, "| `%s` | %d | %t |\n", c, env.Status, env.Retryable)
	}
	table.WriteString(errorCodesEnd)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(src), errorCodesBegin)
	_, after, ok2 := strings.Cut(rest, errorCodesEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no %q … %q", path, errorCodesBegin, errorCodesEnd)
	}
	want := before + table.String() + after
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil { //nolint:gosec // a page of the repository
			t.Fatal(err)
		}
		return
	}
	if string(src) != want {
		t.Errorf("%s's table of error codes differs from the code's: run make docs", path)
	}
}

// make sam-local hands SAM its configuration by an absolute path: SAM
// resolves a relative --config-file beside the template (cdk.out/sam/),
// where there is none, and silently runs without it.
func TestSAMLocalFindsItsConfigFile(t *testing.T) {
	out, err := exec.Command("make", "-n", "--no-print-directory", "sam-local").Output()
	if err != nil {
		t.Fatalf("make -n sam-local: %v", err)
	}
	var config string
	for line := range strings.SplitSeq(string(out), "\n") {
		if !strings.Contains(line, "sam local start-api") {
			continue
		}
		fields := strings.Fields(line)
		if i := slices.Index(fields, "--config-file"); i >= 0 && i+1 < len(fields) {
			config = fields[i+1]
		}
	}
	if !filepath.IsAbs(config) {
		t.Fatalf("sam local start-api gets --config-file %q, want an absolute path:\n%s", config, out)
	}
	if _, err := os.Stat(config); err != nil {
		t.Errorf("--config-file %s: %v", config, err)
	}
}
