package agentfile

import (
	"fmt"
	"strconv"
)

// Workflow is a parsed Agentfile.
type Workflow struct {
	File    string
	Name    string
	NamePos Pos
	Inputs  []*Input
	Agents  []*Agent
	Goals   []*Goal
	Steps   []*Step
}

// Input is a value the workflow takes.
type Input struct {
	Name    string
	Default *Value // nil: required
	Pos     Pos
}

// Value is a literal: a string or a number.
type Value struct {
	Text     string
	IsNumber bool
}

// Agent is a persona goals can run with.
type Agent struct {
	Name   string
	From   string // path as written
	Prompt string // loaded by Load
	Pos    Pos
}

// Goal is an outcome to reach, with its prompt inline or from a file.
type Goal struct {
	Name   string
	Inline string // the prompt when written inline
	From   string // path as written, when FROM
	Prompt string // inline, or loaded by Load
	Using  []string
	Pos    Pos
}

// StepKind says how a step runs its goals.
type StepKind string

// Step kinds.
const (
	RunStep  StepKind = "RUN"
	LoopStep StepKind = "LOOP"
)

// Step runs goals once (RUN) or until convergence (LOOP).
type Step struct {
	Kind  StepKind
	Name  string
	Using []string
	// Within limits a LOOP: a number, or an input's name in WithinVar.
	Within    int
	WithinVar string
	Pos       Pos
}

// Parse reads an Agentfile's source into a workflow. It checks syntax only; see
// Validate and Load.
func Parse(file, src string) (*Workflow, error) {
	if len(src) > MaxFileBytes {
		return nil, &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileBytes)}
	}
	toks, err := Lex(file, src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, wf: &Workflow{File: file}}
	for p.peek().Kind != EOF {
		if err := p.statement(); err != nil {
			return nil, err
		}
	}
	return p.wf, nil
}

type parser struct {
	toks []Token
	i    int
	wf   *Workflow
}

func (p *parser) peek() Token { return p.toks[p.i] }

func (p *parser) next() Token {
	t := p.toks[p.i]
	if t.Kind != EOF {
		p.i++
	}
	return t
}

func errAt(t Token, format string, args ...any) error {
	return &Error{Pos: t.Pos, Msg: fmt.Sprintf(format, args...)}
}

func describe(t Token) string {
	switch t.Kind {
	case EOF, Newline, Comma:
		return t.Kind.String()
	case String:
		return fmt.Sprintf("string %q", t.Text)
	case Var:
		return fmt.Sprintf("variable $%s", t.Text)
	default:
		return fmt.Sprintf("%s %q", t.Kind, t.Text)
	}
}

func (p *parser) expectKeyword(kw string) error {
	t := p.next()
	if t.Kind != Keyword || t.Text != kw {
		return errAt(t, "expected %s, found %s", kw, describe(t))
	}
	return nil
}

func (p *parser) ident(what string) (Token, error) {
	t := p.next()
	if t.Kind != Ident {
		return t, errAt(t, "expected %s (letters, digits, '_' or '-'), found %s", what, describe(t))
	}
	return t, nil
}

func (p *parser) endOfStatement() error {
	t := p.next()
	if t.Kind != Newline && t.Kind != EOF {
		return errAt(t, "unexpected %s at the end of the statement", describe(t))
	}
	return nil
}

func (p *parser) statement() error {
	t := p.next()
	if t.Kind != Keyword {
		if t.Kind == Ident || t.Kind == Path {
			return errAt(t, "unknown keyword %q: a statement starts with NAME, INPUT, AGENT, GOAL, RUN or LOOP", t.Text)
		}
		return errAt(t, "expected a statement, found %s", describe(t))
	}
	var err error
	switch t.Text {
	case "NAME":
		err = p.name(t)
	case "INPUT":
		err = p.input(t)
	case "AGENT":
		err = p.agent(t)
	case "GOAL":
		err = p.goal(t)
	case "RUN", "LOOP":
		err = p.step(t)
	default:
		return errAt(t, "%s cannot start a statement", t.Text)
	}
	if err != nil {
		return err
	}
	return p.endOfStatement()
}

func (p *parser) name(kw Token) error {
	t, err := p.ident("a workflow name")
	if err != nil {
		return err
	}
	if p.wf.Name != "" {
		return errAt(kw, "NAME given twice (first at line %d)", p.wf.NamePos.Line)
	}
	p.wf.Name, p.wf.NamePos = t.Text, kw.Pos
	return nil
}

func (p *parser) input(kw Token) error {
	t, err := p.ident("an input name")
	if err != nil {
		return err
	}
	in := &Input{Name: t.Text, Pos: kw.Pos}
	if n := p.peek(); n.Kind == Keyword && n.Text == "DEFAULT" {
		p.next()
		v := p.next()
		switch v.Kind {
		case String:
			in.Default = &Value{Text: v.Text}
		case Number:
			in.Default = &Value{Text: v.Text, IsNumber: true}
		default:
			return errAt(v, "DEFAULT takes a string or a number, found %s", describe(v))
		}
	}
	p.wf.Inputs = append(p.wf.Inputs, in)
	return nil
}

func (p *parser) path() (string, error) {
	t := p.next()
	switch t.Kind {
	case Path, Ident, String:
		if t.Text == "" {
			return "", errAt(t, "empty path")
		}
		return t.Text, nil
	default:
		return "", errAt(t, "expected a path after FROM, found %s", describe(t))
	}
}

func (p *parser) agent(kw Token) error {
	t, err := p.ident("an agent name")
	if err != nil {
		return err
	}
	if err := p.expectKeyword("FROM"); err != nil {
		return err
	}
	path, err := p.path()
	if err != nil {
		return err
	}
	p.wf.Agents = append(p.wf.Agents, &Agent{Name: t.Text, From: path, Pos: kw.Pos})
	return nil
}

func (p *parser) goal(kw Token) error {
	t, err := p.ident("a goal name")
	if err != nil {
		return err
	}
	g := &Goal{Name: t.Text, Pos: kw.Pos}
	switch n := p.next(); {
	case n.Kind == String:
		g.Inline, g.Prompt = n.Text, n.Text
	case n.Kind == Keyword && n.Text == "FROM":
		if g.From, err = p.path(); err != nil {
			return err
		}
	default:
		return errAt(n, "GOAL %s needs a quoted prompt or FROM <path>, found %s", g.Name, describe(n))
	}
	if n := p.peek(); n.Kind == Keyword && n.Text == "USING" {
		p.next()
		if g.Using, err = p.list("an agent name"); err != nil {
			return err
		}
	}
	p.wf.Goals = append(p.wf.Goals, g)
	return nil
}

func (p *parser) step(kw Token) error {
	t, err := p.ident("a step name")
	if err != nil {
		return err
	}
	s := &Step{Kind: StepKind(kw.Text), Name: t.Text, Pos: kw.Pos}
	if err := p.expectKeyword("USING"); err != nil {
		return err
	}
	if s.Using, err = p.list("a goal name"); err != nil {
		return err
	}
	if s.Kind == LoopStep {
		if err := p.expectKeyword("WITHIN"); err != nil {
			return err
		}
		switch w := p.next(); w.Kind {
		case Number:
			n, _ := strconv.Atoi(w.Text) // at most 9 digits: fits
			if n < 1 {
				return errAt(w, "WITHIN needs at least 1 iteration")
			}
			s.Within = n
		case Var:
			s.WithinVar = w.Text
		default:
			return errAt(w, "WITHIN takes a number or $input, found %s", describe(w))
		}
	}
	p.wf.Steps = append(p.wf.Steps, s)
	return nil
}

// list reads "a, b, c".
func (p *parser) list(what string) ([]string, error) {
	var out []string
	for {
		t, err := p.ident(what)
		if err != nil {
			return nil, err
		}
		out = append(out, t.Text)
		if p.peek().Kind != Comma {
			return out, nil
		}
		p.next()
	}
}
