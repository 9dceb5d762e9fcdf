package agentfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Validate checks a parsed, loaded workflow: NAME once, names unique, every
// reference defined before use, no cycles between goals, at least one step. It
// returns every problem found, in file order.
func Validate(wf *Workflow) error {
	var errs []*Error
	add := func(p Pos, format string, args ...any) {
		errs = append(errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
	if wf.Name == "" {
		add(Pos{File: wf.File, Line: 1, Col: 1}, "NAME is missing: an Agentfile names its workflow once")
	}
	inputs := map[string]*Input{}
	for _, in := range wf.Inputs {
		if inputs[in.Name] != nil {
			add(in.Pos, "input %s is defined twice", in.Name)
		}
		inputs[in.Name] = in
	}
	agents := map[string]*Agent{}
	for _, a := range wf.Agents {
		if agents[a.Name] != nil {
			add(a.Pos, "agent %s is defined twice", a.Name)
		}
		agents[a.Name] = a
	}
	goals := map[string]*Goal{}
	for _, g := range wf.Goals {
		if goals[g.Name] != nil {
			add(g.Pos, "goal %s is defined twice", g.Name)
		}
		goals[g.Name] = g
		for _, name := range g.Using {
			a := agents[name]
			switch {
			case a == nil:
				add(g.Pos, "goal %s uses agent %s, which is not defined", g.Name, name)
			case before(g.Pos, a.Pos):
				add(g.Pos, "goal %s uses agent %s before its definition at line %d", g.Name, name, a.Pos.Line)
			}
		}
		for _, ref := range Refs(g.Prompt) {
			if inputs[ref] == nil && !slices.ContainsFunc(wf.Goals, func(o *Goal) bool { return o.Name == ref }) {
				add(g.Pos, "goal %s refers to $%s, which is neither an input nor a goal", g.Name, ref)
			}
		}
	}
	steps := map[string]bool{}
	for _, s := range wf.Steps {
		if steps[s.Name] {
			add(s.Pos, "step %s is defined twice", s.Name)
		}
		steps[s.Name] = true
		for _, name := range s.Using {
			g := goals[name]
			switch {
			case g == nil:
				add(s.Pos, "%s %s uses goal %s, which is not defined", s.Kind, s.Name, name)
			case before(s.Pos, g.Pos):
				add(s.Pos, "%s %s uses goal %s before its definition at line %d", s.Kind, s.Name, name, g.Pos.Line)
			}
		}
		if s.WithinVar != "" && inputs[s.WithinVar] == nil {
			add(s.Pos, "LOOP %s: WITHIN $%s is not an input", s.Name, s.WithinVar)
		}
	}
	if len(wf.Steps) == 0 {
		add(Pos{File: wf.File, Line: 1, Col: 1}, "no RUN or LOOP step: nothing would run")
	}
	for _, cycle := range goalCycles(wf.Goals, inputs) {
		g := goals[cycle[0]]
		add(g.Pos, "goals refer to each other in a circle: %s", strings.Join(append(cycle, cycle[0]), " → $"))
	}
	slices.SortStableFunc(errs, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

func before(a, b Pos) bool { return a.Line < b.Line || (a.Line == b.Line && a.Col < b.Col) }

// goalCycles finds the cycles of $goal references between goal prompts. A
// name that is also an input's is no edge: $x is the input until goal x has
// produced output (and in goal x's own prompt), so it never waits on x.
func goalCycles(goals []*Goal, inputs map[string]*Input) [][]string {
	deps := map[string][]string{}
	names := map[string]bool{}
	for _, g := range goals {
		names[g.Name] = true
	}
	for _, g := range goals {
		for _, r := range Refs(g.Prompt) {
			if names[r] && inputs[r] == nil {
				deps[g.Name] = append(deps[g.Name], r)
			}
		}
	}
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var cycles [][]string
	var visit func(string)
	visit = func(n string) {
		state[n] = active
		stack = append(stack, n)
		for _, d := range deps[n] {
			switch state[d] {
			case unseen:
				visit(d)
			case active:
				i := slices.Index(stack, d)
				cycles = append(cycles, slices.Clone(stack[i:]))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, g := range goals {
		if state[g.Name] == unseen {
			visit(g.Name)
		}
	}
	return cycles
}

// Refs returns the names a prompt refers to with $name, in order, without repeats;
// an escaped \$ is no reference. A name is the letters, digits and '_' after
// the '$' (VarLen): in "a $word_count-word essay" it is word_count.
func Refs(prompt string) []string {
	var out []string
	for i := 0; i < len(prompt); i++ {
		if prompt[i] == '\\' && i+1 < len(prompt) && prompt[i+1] == '$' {
			i++
			continue
		}
		if prompt[i] != '$' {
			continue
		}
		j := i + 1 + VarLen(prompt[i+1:])
		if name := prompt[i+1 : j]; name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
		i = j - 1
	}
	return out
}

// Interpolate replaces each $name of prompt that vars holds with its value, and
// \$ with $. Unknown names are left as written.
func Interpolate(prompt string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(prompt); i++ {
		if prompt[i] == '\\' && i+1 < len(prompt) && prompt[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if prompt[i] != '$' {
			b.WriteByte(prompt[i])
			continue
		}
		j := i + 1 + VarLen(prompt[i+1:])
		if v, ok := vars[prompt[i+1:j]]; ok && j > i+1 {
			b.WriteString(v)
			i = j - 1
			continue
		}
		b.WriteByte('$')
	}
	return b.String()
}

// VarLen is the length of the variable name at the start of s: letters,
// digits and '_', the first not a digit; 0 if there is none. Every place that
// reads $name in a prompt (validation, interpolation, inspect, the dependency
// graph) reads it this way, as the language's reference runtime does.
func VarLen(s string) int {
	n := 0
	for n < len(s) && n < maxVarLen {
		c := s[n]
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
		if !letter && (n == 0 || c < '0' || c > '9') {
			break
		}
		n++
	}
	return n
}

// maxVarLen bounds a variable name, as identifiers are bounded.
const maxVarLen = 128

// PromptExtensions are the prompt file types FROM accepts.
var PromptExtensions = []string{".md", ".txt"}

// Load reads the Agentfile at path, parses it, loads every FROM prompt (paths are
// relative to the Agentfile's folder) and validates the result.
func Load(path string) (*Workflow, error) {
	src, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("load Agentfile: %w", err)
	}
	wf, err := Parse(path, src)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var errs []error
	load := func(pos Pos, from string) string {
		p := from
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if !slices.Contains(PromptExtensions, strings.ToLower(filepath.Ext(p))) {
			errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("FROM %s: prompt files are .md or .txt", from)})
			return ""
		}
		text, err := readBounded(p)
		if err != nil {
			errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("FROM %s: %v", from, err)})
			return ""
		}
		if strings.TrimSpace(text) == "" {
			errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("FROM %s: the prompt file is empty", from)})
		}
		return text
	}
	for _, a := range wf.Agents {
		a.Prompt = load(a.Pos, a.From)
	}
	for _, g := range wf.Goals {
		if g.From != "" {
			g.Prompt = load(g.Pos, g.From)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := Validate(wf); err != nil {
		return nil, err
	}
	return wf, nil
}

func readBounded(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("file not found: %s", path)
		}
		return "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("%s is a folder, not a file", path)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	// The size Stat gives is not trusted: the file may grow, or be one the
	// kernel sizes as empty. Read what is open, at most one byte past the limit.
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	return string(b), nil
}
