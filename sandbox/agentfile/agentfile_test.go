package agentfile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/sandbox/agentfile"
)

func kinds(toks []agentfile.Token) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.Kind {
		case agentfile.Newline:
			b.WriteString("; ")
		case agentfile.EOF:
			b.WriteString("EOF")
		case agentfile.Comma:
			b.WriteString(", ")
		default:
			b.WriteString(t.Kind.String() + ":" + t.Text + " ")
		}
	}
	return b.String()
}

func TestLex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want string
	}{
		{"keywords and idents", "NAME research-pipeline", `keyword:NAME identifier:research-pipeline ; EOF`},
		{"comments and blank lines", "# intro\n\n  NAME x # trailing\n\n", `keyword:NAME identifier:x ; EOF`},
		{"string escapes", `GOAL g "say \"hi\"\n\\ \$5"`, "keyword:GOAL identifier:g string:say \"hi\"\n\\ \\$5 ; EOF"},
		{"path", "AGENT critic FROM agents/critic.md", `keyword:AGENT identifier:critic keyword:FROM path:agents/critic.md ; EOF`},
		{"list, number, variable", "LOOP l USING a, b,c WITHIN $max", `keyword:LOOP identifier:l keyword:USING identifier:a , identifier:b , identifier:c keyword:WITHIN variable:max ; EOF`},
		{"number", "INPUT n DEFAULT 42", `keyword:INPUT identifier:n keyword:DEFAULT number:42 ; EOF`},
		{"windows line ends", "NAME x\r\nRUN r USING g\r\n", `keyword:NAME identifier:x ; keyword:RUN identifier:r keyword:USING identifier:g ; EOF`},
	}
	for _, tt := range tests {
		toks, err := agentfile.Lex("A", tt.src)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := kinds(toks); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	toks, _ := agentfile.Lex("A", "# c\n\nNAME  x\nINPUT y")
	if p := toks[1].Pos; p.Line != 3 || p.Col != 7 {
		t.Errorf("position of x = %v, want line 3 col 7", p)
	}
	if p := toks[4].Pos; p.Line != 4 || p.Col != 7 {
		t.Errorf("position of y = %v, want line 4 col 7", p)
	}
}

func TestLexErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		`GOAL g "open`:         "A:1:8: unterminated string",
		`GOAL g "bad \q"`:      `A:1:13: unknown escape \q`,
		"NAME x\n\"\xff\"":     "not valid UTF-8",
		"NAME x\nGOAL g \"a\\": "A:2:8: unterminated string",
	} {
		_, err := agentfile.Lex("A", src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Lex(%q) = %v, want %q", src, err, want)
		}
	}
}

const full = `# A review workflow
NAME code-review
INPUT repo
INPUT rounds DEFAULT 3
INPUT style DEFAULT "concise"
AGENT critic FROM agents/critic.md
AGENT fixer FROM agents/fixer.md
GOAL scan "Scan $repo in a $style way"
GOAL review FROM goals/review.md USING critic, fixer
GOAL summary "Summarise $review"
RUN first USING scan
LOOP improve USING review, summary WITHIN $rounds
LOOP polish USING summary WITHIN 2
`

func TestParse(t *testing.T) {
	t.Parallel()
	wf, err := agentfile.Parse("Agentfile", full)
	if err != nil {
		t.Fatal(err)
	}
	if wf.Name != "code-review" || len(wf.Inputs) != 3 || len(wf.Agents) != 2 || len(wf.Goals) != 3 || len(wf.Steps) != 3 {
		t.Fatalf("workflow %+v", wf)
	}
	if in := wf.Inputs[1]; in.Name != "rounds" || in.Default == nil || in.Default.Text != "3" || !in.Default.IsNumber {
		t.Errorf("input rounds %+v", in)
	}
	if in := wf.Inputs[0]; in.Default != nil {
		t.Errorf("input repo has a default")
	}
	if a := wf.Agents[0]; a.Name != "critic" || a.From != "agents/critic.md" || a.Pos.Line != 6 {
		t.Errorf("agent %+v", a)
	}
	if g := wf.Goals[1]; g.From != "goals/review.md" || !reflect.DeepEqual(g.Using, []string{"critic", "fixer"}) {
		t.Errorf("goal review %+v", g)
	}
	if g := wf.Goals[0]; g.Prompt != "Scan $repo in a $style way" {
		t.Errorf("goal scan %+v", g)
	}
	if s := wf.Steps[1]; s.Kind != agentfile.LoopStep || s.WithinVar != "rounds" || !reflect.DeepEqual(s.Using, []string{"review", "summary"}) {
		t.Errorf("step improve %+v", s)
	}
	if s := wf.Steps[2]; s.Within != 2 || s.WithinVar != "" {
		t.Errorf("step polish %+v", s)
	}
	if s := wf.Steps[0]; s.Kind != agentfile.RunStep || s.Pos.Line != 11 {
		t.Errorf("step first %+v", s)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"TASK x", `A:1:1: unknown keyword "TASK"`},
		{"NAME x\nname y", `A:2:1: unknown keyword "name"`},
		{"NAME", "A:1:5: expected a workflow name"},
		{"NAME a b", `A:1:8: unexpected identifier "b"`},
		{"NAME a\nNAME b", "A:2:1: NAME given twice (first at line 1)"},
		{"INPUT x DEFAULT", "A:1:16: DEFAULT takes a string or a number"},
		{"AGENT a agents/a.md", "A:1:9: expected FROM"},
		{"AGENT a FROM", "A:1:13: expected a path after FROM"},
		{"GOAL g", "A:1:7: GOAL g needs a quoted prompt or FROM <path>"},
		{"GOAL g \"x\" USING", "A:1:17: expected an agent name"},
		{"GOAL g \"x\" USING a,", "A:1:20: expected an agent name"},
		{"RUN r g", "A:1:7: expected USING"},
		{"LOOP l USING g", "A:1:15: expected WITHIN"},
		{"LOOP l USING g WITHIN 0", "A:1:23: WITHIN needs at least 1 iteration"},
		{"LOOP l USING g WITHIN many", "A:1:23: WITHIN takes a number or $input"},
		{"RUN r USING g WITHIN 3", `A:1:15: unexpected keyword "WITHIN"`},
		{"FROM x", "A:1:1: FROM cannot start a statement"},
		{"\"x\"", `A:1:1: expected a statement, found string "x"`},
	}
	for _, tt := range tests {
		_, err := agentfile.Parse("A", tt.src)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.src, err, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"ok", "NAME w\nINPUT topic\nGOAL g \"About $topic\"\nRUN r USING g", nil},
		{"no name", "GOAL g \"x\"\nRUN r USING g", []string{"A:1:1: NAME is missing"}},
		{"no step", "NAME w\nGOAL g \"x\"", []string{"no RUN or LOOP step"}},
		{"undefined goal", "NAME w\nRUN r USING g", []string{"A:2:1: RUN r uses goal g, which is not defined"}},
		{"goal after use", "NAME w\nRUN r USING g\nGOAL g \"x\"", []string{"A:2:1: RUN r uses goal g before its definition at line 3"}},
		{"undefined agent", "NAME w\nGOAL g \"x\" USING critic\nRUN r USING g", []string{"goal g uses agent critic, which is not defined"}},
		{"within not input", "NAME w\nGOAL g \"x\"\nLOOP l USING g WITHIN $n", []string{"LOOP l: WITHIN $n is not an input"}},
		{"unknown ref", "NAME w\nGOAL g \"use $nothing\"\nRUN r USING g", []string{"goal g refers to $nothing"}},
		{"cycle", "NAME w\nGOAL a \"after $b\"\nGOAL b \"after $a\"\nRUN r USING a, b", []string{"goals refer to each other in a circle: a → $b → $a"}},
		{"self cycle", "NAME w\nGOAL a \"again $a\"\nRUN r USING a", []string{"circle: a → $a"}},
		{"duplicates", "NAME w\nINPUT i\nINPUT i\nGOAL g \"x\"\nGOAL g \"y\"\nRUN r USING g\nRUN r USING g", []string{"input i is defined twice", "goal g is defined twice", "step r is defined twice"}},
		{"escaped dollar", "NAME w\nGOAL g \"costs \\$5 and \\$x\"\nRUN r USING g", nil},
		// Files written for the reference runtime: a name ends at the first
		// character that is not a letter, digit or '_'; a goal may share an
		// input's name ($x is the input until goal x has run).
		{"variable ends at a dash", "NAME w\nINPUT word_count\nGOAL g \"a $word_count-word essay\"\nRUN r USING g", nil},
		{"goal named like an input", "NAME w\nINPUT draft\nGOAL draft \"Improve $draft\"\nGOAL review \"Review $draft\"\nRUN r USING draft, review", nil},
		{"goals named like inputs refer to each other", "NAME w\nINPUT a\nINPUT b\nGOAL a \"after $b\"\nGOAL b \"after $a\"\nRUN r USING a, b", nil},
	}
	for _, tt := range tests {
		wf, err := agentfile.Parse("A", tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		err = agentfile.Validate(wf)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want %q", tt.name, err, w)
			}
		}
	}
}

func TestInterpolate(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"topic": "Go", "scan": "3 issues", "a-b": "dash", "word_count": "500"}
	tests := []struct{ in, want string }{
		{"About $topic.", "About Go."},
		{"$scan found; $unknown stays", "3 issues found; $unknown stays"},
		{`price \$5, literal \$topic`, "price $5, literal $topic"},
		{"$a-b and $", "$a-b and $"}, // $a is the name, and it is unknown
		{"a $word_count-word essay", "a 500-word essay"},
		{"$9 and $_x", "$9 and $_x"},
		{"$$topic", "$Go"},
	}
	for _, tt := range tests {
		if got := agentfile.Interpolate(tt.in, vars); got != tt.want {
			t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := agentfile.Refs("a $word_count-word essay on $topic."); !reflect.DeepEqual(got, []string{"word_count", "topic"}) {
		t.Errorf("Refs stops at the first non-name character: %v", got)
	}
	if got := agentfile.Refs(`$a and $b, $a again, \$c`); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Refs = %v", got)
	}
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadResolvesRelativeToAgentfile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "flows/agents/critic.md", "You are a critic.")
	write(t, dir, "flows/agents/fixer.md", "You fix things.")
	write(t, dir, "flows/goals/review.txt", "Review $repo")
	path := write(t, dir, "flows/Agentfile", `NAME w
INPUT repo
INPUT rounds DEFAULT 3
AGENT critic FROM agents/critic.md
AGENT fixer FROM agents/fixer.md
GOAL review FROM goals/review.txt USING critic, fixer
LOOP l USING review WITHIN $rounds
`)
	t.Chdir(t.TempDir()) // the working directory must not matter
	wf, err := agentfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if wf.Agents[0].Prompt != "You are a critic." || wf.Goals[0].Prompt != "Review $repo" {
		t.Errorf("loaded prompts %q / %q", wf.Agents[0].Prompt, wf.Goals[0].Prompt)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "empty.md", "  \n")
	write(t, dir, "prompt.json", "{}")
	if err := os.Mkdir(filepath.Join(dir, "folder.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"AGENT a FROM missing.md":  "A:2:1: FROM missing.md: file not found",
		"AGENT a FROM empty.md":    "the prompt file is empty",
		"AGENT a FROM prompt.json": "prompt files are .md or .txt",
		"AGENT a FROM folder.md":   "is a folder",
	}
	for stmt, want := range tests {
		path := write(t, dir, "A", "NAME w\n"+stmt+"\nGOAL g \"x\" USING a\nRUN r USING g\n")
		_, err := agentfile.Load(path)
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), path, "A"), want) {
			t.Errorf("%s: %v, want %q", stmt, err, want)
		}
	}
	if _, err := agentfile.Load(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "file not found") {
		t.Errorf("missing Agentfile: %v", err)
	}
}

func FuzzLex(f *testing.F) {
	f.Add(full)
	f.Add(`GOAL g "a\"b\\c\$d"`)
	f.Fuzz(func(t *testing.T, src string) {
		toks, err := agentfile.Lex("F", src)
		if err != nil {
			return
		}
		if len(toks) == 0 || toks[len(toks)-1].Kind != agentfile.EOF {
			t.Fatal("token stream does not end with EOF")
		}
		for i, tok := range toks {
			if tok.Pos.Line < 1 || tok.Pos.Col < 1 || tok.Pos.File != "F" {
				t.Fatalf("token %+v has no position", tok)
			}
			if i > 0 && tok.Kind != agentfile.EOF {
				// In order: each token after the one before it.
				if p := toks[i-1].Pos; tok.Pos.Line < p.Line || (tok.Pos.Line == p.Line && tok.Pos.Col <= p.Col) {
					t.Fatalf("token %+v at or before %+v", tok, toks[i-1])
				}
			}
			if tok.Kind == agentfile.Newline && (i == 0 || toks[i-1].Kind == agentfile.Newline) {
				t.Fatalf("empty statement at %+v", tok.Pos)
			}
			if tok.Kind == agentfile.Ident && !agentfile.IsIdent(tok.Text) || tok.Kind == agentfile.Var && !agentfile.IsIdent(tok.Text) {
				t.Fatalf("token %+v", tok)
			}
		}
	})
}

// Parse, for any source: an error names the file, line and column; a
// workflow it returns has identifiers for names, a limit on every LOOP and
// goals to run in every step, and printed back as an Agentfile (every
// string and path quoted) it parses to the same workflow, which Validate
// finds valid or not just as it did the first; each problem Validate finds
// names its position.
func FuzzParse(f *testing.F) {
	f.Add(full)
	f.Add("NAME w\nLOOP l USING a, b WITHIN $n\n")
	f.Add("NAME w\r\nINPUT n DEFAULT 3\nINPUT s DEFAULT \"a\\\\$b \\$c\\t\"\nAGENT a FROM \"dir/a b.md\"\nGOAL g FROM x.md USING a\nRUN r USING g, g\n")
	f.Add("NAME w\nGOAL g \"$h\"\nGOAL h \"$g\"\nRUN r USING g\n")
	f.Fuzz(func(t *testing.T, src string) {
		wf, err := agentfile.Parse("F", src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "F:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		verr := agentfile.Validate(wf)
		if verr != nil {
			for _, line := range strings.Split(verr.Error(), "\n") {
				if !strings.HasPrefix(line, "F:") {
					t.Fatalf("problem without position: %q", line)
				}
			}
		}
		for _, s := range wf.Steps {
			if s.Kind == agentfile.LoopStep && s.Within < 1 && s.WithinVar == "" {
				t.Fatalf("LOOP without a limit: %+v", s)
			}
			if len(s.Using) == 0 {
				t.Fatalf("step without goals: %+v", s)
			}
		}
		printed := format(wf)
		again, err := agentfile.Parse("F", printed)
		if err != nil {
			t.Fatalf("%q printed as %q: %v", src, printed, err)
		}
		if a, b := positionless(wf), positionless(again); !reflect.DeepEqual(a, b) {
			t.Fatalf("%q printed as %q parses as\n%+v\nwant\n%+v", src, printed, b, a)
		}
		if (agentfile.Validate(again) == nil) != (verr == nil) {
			t.Fatalf("%q printed as %q: valid %v, then %v", src, printed, verr, agentfile.Validate(again))
		}
	})
}

// format writes wf as an Agentfile.
func format(wf *agentfile.Workflow) string {
	quote := func(s string) string {
		r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "\n", "\\n", "\t", "\\t", "\r", "\\r")
		return "\"" + r.Replace(s) + "\""
	}
	var b strings.Builder
	if wf.Name != "" {
		b.WriteString("NAME " + wf.Name + "\n")
	}
	for _, in := range wf.Inputs {
		b.WriteString("INPUT " + in.Name)
		switch {
		case in.Default == nil:
		case in.Default.IsNumber:
			b.WriteString(" DEFAULT " + in.Default.Text)
		default:
			b.WriteString(" DEFAULT " + quote(in.Default.Text))
		}
		b.WriteString("\n")
	}
	for _, a := range wf.Agents {
		b.WriteString("AGENT " + a.Name + " FROM " + quote(a.From) + "\n")
	}
	for _, g := range wf.Goals {
		b.WriteString("GOAL " + g.Name + " ")
		if g.From != "" {
			b.WriteString("FROM " + quote(g.From))
		} else {
			b.WriteString(quote(g.Inline))
		}
		if len(g.Using) > 0 {
			b.WriteString(" USING " + strings.Join(g.Using, ", "))
		}
		b.WriteString("\n")
	}
	for _, s := range wf.Steps {
		b.WriteString(string(s.Kind) + " " + s.Name + " USING " + strings.Join(s.Using, ", "))
		if s.Kind == agentfile.LoopStep {
			if s.WithinVar != "" {
				b.WriteString(" WITHIN $" + s.WithinVar)
			} else {
				fmt.Fprintf(&b, " WITHIN %d", s.Within)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// positionless is wf without its positions, which printing changes.
func positionless(wf *agentfile.Workflow) agentfile.Workflow {
	out := agentfile.Workflow{File: wf.File, Name: wf.Name}
	for _, in := range wf.Inputs {
		c := *in
		c.Pos = agentfile.Pos{}
		out.Inputs = append(out.Inputs, &c)
	}
	for _, a := range wf.Agents {
		c := *a
		c.Pos = agentfile.Pos{}
		out.Agents = append(out.Agents, &c)
	}
	for _, g := range wf.Goals {
		c := *g
		c.Pos = agentfile.Pos{}
		out.Goals = append(out.Goals, &c)
	}
	for _, s := range wf.Steps {
		c := *s
		c.Pos = agentfile.Pos{}
		out.Steps = append(out.Steps, &c)
	}
	return out
}

// Refs and Interpolate, for any prompt: each reference is a name as VarLen
// reads it, listed once; with no values Interpolate changes nothing but
// \$ to $; with a value for every reference, the values appear as given.
func FuzzInterpolate(f *testing.F) {
	f.Add("Write a $word_count-word essay on $topic, not \\$topic; $topic again. $$x \\\\$y $9 $")
	f.Add("$" + strings.Repeat("a", 200))
	f.Fuzz(func(t *testing.T, prompt string) {
		refs := agentfile.Refs(prompt)
		vars := map[string]string{}
		for i, r := range refs {
			if r == "" || agentfile.VarLen(r) != len(r) || vars[r] != "" {
				t.Fatalf("reference %q in %q", r, prompt)
			}
			vars[r] = fmt.Sprintf("<value %d>", i)
		}
		if got, want := agentfile.Interpolate(prompt, nil), strings.ReplaceAll(prompt, `\$`, `$`); got != want {
			t.Fatalf("Interpolate(%q) without values = %q, want %q", prompt, got, want)
		}
		out := agentfile.Interpolate(prompt, vars)
		for r, v := range vars {
			if !strings.Contains(out, v) {
				t.Fatalf("Interpolate(%q) = %q lacks the value of %s", prompt, out, r)
			}
		}
	})
}

// BenchmarkParse1000Lines measures parse + validate throughput of a 1,000-line
// Agentfile (MB/s is reported from the source size).
func BenchmarkParse1000Lines(b *testing.B) {
	var src strings.Builder
	src.WriteString("NAME bench\nINPUT topic DEFAULT \"go\"\n")
	for i := 0; src.Len() == 0 || strings.Count(src.String(), "\n") < 998; i++ {
		fmt.Fprintf(&src, "GOAL g%d \"Study $topic, part %d, with \\\"quotes\\\" and $topic again\"\n", i, i)
		if i%2 == 1 {
			fmt.Fprintf(&src, "RUN r%d USING g%d, g%d\n", i, i-1, i)
		}
	}
	text := src.String()
	b.SetBytes(int64(len(text)))
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		wf, err := agentfile.Parse("A", text)
		if err != nil {
			b.Fatal(err)
		}
		if err := agentfile.Validate(wf); err != nil {
			b.Fatal(err)
		}
		rec.Add("parse", time.Since(began))
	}
	rec.Done()
}

// TestLoadReadsOnlyBoundedRegularFiles: Load refuses a device (/dev/zero,
// which Stat sizes as empty and never ends) and a FIFO before reading a
// byte, and a file over the limit; it reads no more than the limit allows.
func TestLoadReadsOnlyBoundedRegularFiles(t *testing.T) {
	if _, err := agentfile.Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(/dev/zero) = %v, want not a regular file", err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(big, []byte("NAME x\n"+strings.Repeat("# pad\n", agentfile.MaxFileBytes/6+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agentfile.Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(a file over the limit) = %v, want larger than", err)
	}
	prompt := filepath.Join(dir, "prompt.md")
	if err := os.Symlink("/dev/zero", prompt); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "Small")
	if err := os.WriteFile(small, []byte("NAME x\nGOAL g FROM prompt.md\nRUN r USING g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agentfile.Load(small); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(a prompt linked to /dev/zero) = %v, want not a regular file", err)
	}
}
