package token_test

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rtoken "github.com/remote-agents/remote-agents/shared/token"
)

// Timing statistics: each sample times batch calls of one candidate; the
// candidates' samples interleave, so that load on the machine falls on all
// of them alike, and are compared by their medians.
const (
	timingSamples = 301
	timingBatch   = 32
	// maxTimingRatio is how far apart two candidates' medians may be: far
	// wider than the noise of a loaded 2-core machine (a few percent), far
	// narrower than a comparison that stops at the first differing byte
	// (leaky, below, several times).
	maxTimingRatio = 1.3
)

// medians times each candidate, interleaved, and returns the median ns per
// call of each.
func medians(fns []func()) []float64 {
	samples := make([][]float64, len(fns))
	for i := range timingSamples {
		for k := range fns {
			j := (k + i) % len(fns) // rotate who goes first
			start := time.Now()
			for range timingBatch {
				fns[j]()
			}
			samples[j] = append(samples[j], float64(time.Since(start).Nanoseconds())/timingBatch)
		}
	}
	out := make([]float64, len(fns))
	for j, s := range samples {
		slices.Sort(s)
		out[j] = s[len(s)/2]
	}
	return out
}

func ratio(a, b float64) float64 { return math.Max(a, b) / math.Min(a, b) }

// leaky is the comparison a timing attack exploits: it stops at the first
// differing byte (with a little work per byte, as a loop over a longer
// secret would take).
func leaky(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		for range 8 {
			sink += int(a[i])
		}
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	sink   int
	result bool
)

// flip changes the character at i (hex or base64url) to another of its
// alphabet.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' || s[i] == 'a' {
		c = 'b'
	}
	if strings.ContainsRune("0123456789abcdef", rune(s[i])) && len(s) == 64 {
		c = '0'
		if s[i] == '0' {
			c = '1'
		}
	}
	return s[:i] + string(c) + s[i+1:]
}

// TestSecurityTokenComparisonTimeIsIndependentOfThePrefix (issue 19): the one
// comparison of session tokens, sandbox tokens, bootstrap codes and pool keys,
// token.Match, takes as long for a wrong token that shares all but its last
// character with the right one as for one that differs from its first, and
// as long against a stored hash that shares all but its last hex digit with
// the token's hash as against one that differs from the first (the stored
// side, which an attacker would probe byte by byte). The same statistic,
// applied to a comparison that stops at the first differing byte, must see
// it: so the test can fail.
func TestSecurityTokenComparisonTimeIsIndependentOfThePrefix(t *testing.T) {
	// Not parallel: it measures time.
	for _, kind := range []rtoken.Kind{rtoken.Session, rtoken.Sandbox, rtoken.Bootstrap} {
		plain, stored := rtoken.New(kind)
		body := len(string(kind)) + 1
		longPrefix := flip(plain, len(plain)-1) // all but the last character
		noPrefix := flip(plain, body)           // the kind's prefix only
		if rtoken.Check(kind, longPrefix) != nil || rtoken.Check(kind, noPrefix) != nil {
			t.Fatalf("the wrong tokens %q and %q are not well-formed: Match would not compare them", longPrefix, noPrefix)
		}
		m := medians([]func(){
			func() { result = rtoken.Match(kind, longPrefix, stored) },
			func() { result = rtoken.Match(kind, noPrefix, stored) },
		})
		t.Logf("checked: %s tokens: wrong token sharing %d characters %.0f ns, sharing %d %.0f ns (ratio %.3f, at most %.2f)",
			kind, len(plain)-1, m[0], body, m[1], ratio(m[0], m[1]), maxTimingRatio)
		if r := ratio(m[0], m[1]); r > maxTimingRatio {
			t.Errorf("%s: Match's time depends on how much of the token a guess gets right: %.0f ns against %.0f ns", kind, m[0], m[1])
		}

		// The stored side: the token's own hash, wrong in its last digit or
		// in its first.
		h := rtoken.Hash(plain)
		lastWrong, firstWrong := flip(h, len(h)-1), flip(h, 0)
		m = medians([]func(){
			func() { result = rtoken.Match(kind, plain, lastWrong) },
			func() { result = rtoken.Match(kind, plain, firstWrong) },
		})
		t.Logf("checked: %s tokens: stored hash wrong in its last digit %.0f ns, in its first %.0f ns (ratio %.3f)", kind, m[0], m[1], ratio(m[0], m[1]))
		if r := ratio(m[0], m[1]); r > maxTimingRatio {
			t.Errorf("%s: Match's time depends on the prefix the hashes share: %.0f ns against %.0f ns", kind, m[0], m[1])
		}
	}

	// The detector works: a comparison that stops early is seen.
	plain, _ := rtoken.New(rtoken.Session)
	h := rtoken.Hash(plain)
	lastWrong, firstWrong := flip(h, len(h)-1), flip(h, 0)
	m := medians([]func(){
		func() { result = leaky(rtoken.Hash(plain), lastWrong) },
		func() { result = leaky(rtoken.Hash(plain), firstWrong) },
	})
	t.Logf("checked: an early-exit comparison: %.0f ns against %.0f ns (ratio %.2f): the statistic detects it", m[0], m[1], ratio(m[0], m[1]))
	if r := ratio(m[0], m[1]); r <= maxTimingRatio {
		t.Errorf("the statistic cannot tell an early-exit comparison (ratio %.2f): the timing checks above prove nothing", r)
	}
}

// TestSecurityTokensAreComparedAsHashesInConstantTime: what the timing test
// cannot see on a fast machine, the code says. token.Match hashes the
// presented token and compares the hashes with subtle.ConstantTimeCompare,
// with no other comparison of either; a stored plaintext never matches; and
// no code of the platform compares a token, code or key hash with == or !=
// (bar the empty string): every check goes through Match, and app keys are
// found by their hash.
func TestSecurityTokensAreComparedAsHashesInConstantTime(t *testing.T) {
	t.Parallel()
	plain, stored := rtoken.New(rtoken.Sandbox)
	if !rtoken.Match(rtoken.Sandbox, plain, stored) || rtoken.Match(rtoken.Sandbox, plain, plain) || rtoken.Match(rtoken.Session, plain, stored) {
		t.Fatal("Match does not compare the hash of a token of its kind with the stored hash")
	}
	t.Logf("checked: a stored plaintext or a token of another kind never matches")

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "token.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var match *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Match" {
			match = fd
		}
	}
	if match == nil {
		t.Fatal("no func Match in token.go")
	}
	constantTime := false
	ast.Inspect(match.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "ConstantTimeCompare" {
				for _, a := range n.Args {
					if strings.Contains(render(fset, a), "Hash(plain)") {
						constantTime = true
					}
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && !trivial(n) {
				t.Errorf("token.Match compares with %s at %s: %s", n.Op, fset.Position(n.Pos()), render(fset, n))
			}
		}
		return true
	})
	if !constantTime {
		t.Error("token.Match does not compare Hash(plain) with subtle.ConstantTimeCompare")
	}
	t.Logf("checked: token.Match compares Hash(plain) with subtle.ConstantTimeCompare and nothing else")

	// Everywhere in the platform: no token hash is compared with == or !=.
	secretHash := regexp.MustCompile(`(Token|Code|Key)Hash(es)?$`)
	files := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "storetest" || d.Name() == "testdata") {
			return filepath.SkipDir // the in-memory store of the contract tests
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pf, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(pf, func(n ast.Node) bool {
			b, ok := n.(*ast.BinaryExpr)
			if !ok || (b.Op != token.EQL && b.Op != token.NEQ) || trivial(b) {
				return true
			}
			for _, side := range []ast.Expr{b.X, b.Y} {
				if sel, ok := side.(*ast.SelectorExpr); ok && secretHash.MatchString(sel.Sel.Name) {
					t.Errorf("%s compares a secret's hash with %s: %s (use token.Match)", fset.Position(b.Pos()), b.Op, render(fset, b))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checked: %d files of shared/ compare no token, code or key hash with == or !=", files)
}

// trivial: a comparison with "", nil or a number (a result code, a length).
func trivial(b *ast.BinaryExpr) bool {
	for _, side := range []ast.Expr{b.X, b.Y} {
		if lit, ok := side.(*ast.BasicLit); ok && (lit.Value == `""` || lit.Kind == token.INT) {
			return true
		}
		if id, ok := side.(*ast.Ident); ok && id.Name == "nil" {
			return true
		}
	}
	return false
}

func render(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	if err := format.Node(&b, fset, n); err != nil {
		return err.Error()
	}
	return b.String()
}
