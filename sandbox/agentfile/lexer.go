// Package agentfile reads Agentfiles: the lexer, the parser to an AST, validation
// and the loading of prompt files. One statement per line, `#` comments:
//
//	NAME <name>
//	INPUT <id> [DEFAULT <string | number>]
//	AGENT <id> FROM <path>
//	GOAL <id> (<string> | FROM <path>) [USING <id>, <id> ...]
//	RUN <id> USING <goal>, <goal> ...
//	LOOP <id> USING <goal>, <goal> ... WITHIN (<number> | $<input>)
//
// Errors name the file, line and column.
package agentfile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is the kind of a token.
type Kind int

// Token kinds.
const (
	EOF     Kind = iota
	Newline      // end of a statement
	Keyword      // NAME, INPUT, AGENT, GOAL, RUN, LOOP, FROM, USING, WITHIN, DEFAULT
	Ident        // letters, digits, '_' and '-'
	String       // a double-quoted string, unescaped
	Number       // a non-negative integer
	Var          // $identifier
	Path         // any other word (after FROM)
	Comma
)

func (k Kind) String() string {
	return [...]string{"end of file", "end of line", "keyword", "identifier", "string", "number", "variable", "path", "','"}[k]
}

// Keywords of the language.
var Keywords = []string{"NAME", "INPUT", "AGENT", "GOAL", "RUN", "LOOP", "FROM", "USING", "WITHIN", "DEFAULT"}

// Pos is a position in a file; lines and columns count from 1, columns in runes.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Token is one lexeme.
type Token struct {
	Kind Kind
	Text string // the value: unescaped for strings, without '$' for variables
	Pos  Pos
}

// Error is a problem at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// MaxFileBytes bounds an Agentfile or prompt file.
const MaxFileBytes = 1 << 20

// Lex splits src into tokens. Comments and blank lines produce nothing; every
// statement ends with a Newline token, and the stream with EOF.
func Lex(file, src string) ([]Token, error) {
	if !utf8.ValidString(src) {
		return nil, &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "file is not valid UTF-8"}
	}
	var toks []Token
	for i, line := range strings.Split(src, "\n") {
		lineToks, end, err := lexLine(file, i+1, strings.TrimSuffix(line, "\r"))
		if err != nil {
			return nil, err
		}
		if len(lineToks) > 0 {
			toks = append(toks, lineToks...)
			toks = append(toks, Token{Kind: Newline, Pos: Pos{File: file, Line: i + 1, Col: end + 1}})
		}
	}
	line := strings.Count(src, "\n") + 1
	return append(toks, Token{Kind: EOF, Pos: Pos{File: file, Line: line, Col: 1}}), nil
}

// lexLine returns the tokens of one line and the rune index just after the last.
func lexLine(file string, lineNo int, line string) ([]Token, int, error) {
	var toks []Token
	runes := []rune(line)
	pos := func(i int) Pos { return Pos{File: file, Line: lineNo, Col: i + 1} }
	end := 0
	for i := 0; i < len(runes); {
		switch runes[i] {
		case ' ', '\t':
			i++
			continue
		case '#':
			return toks, end, nil
		case ',':
			toks = append(toks, Token{Kind: Comma, Text: ",", Pos: pos(i)})
			i++
		case '"':
			s, n, err := lexString(runes[i:])
			if err != nil {
				return nil, 0, &Error{Pos: pos(i + n), Msg: err.Error()}
			}
			toks = append(toks, Token{Kind: String, Text: s, Pos: pos(i)})
			i += n
		default:
			j := i
			for j < len(runes) && !strings.ContainsRune(" \t,\"#", runes[j]) {
				j++
			}
			toks = append(toks, classify(string(runes[i:j]), pos(i)))
			i = j
		}
		end = i
	}
	return toks, end, nil
}

// lexString reads a double-quoted string at the start of rs, returning its value
// and how many runes it took, or an error and the offset it is at (the opening
// quote of an unterminated string). Escapes: \" \\ \n \t \r \$.
func lexString(rs []rune) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(rs); i++ {
		switch rs[i] {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 == len(rs) {
				return "", 0, fmt.Errorf("unterminated string")
			}
			i++
			switch rs[i] {
			case '"', '\\':
				b.WriteRune(rs[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '$':
				b.WriteString(`\$`) // kept escaped: interpolation leaves it as a literal '$'
			default:
				return "", i - 1, fmt.Errorf("unknown escape \\%c in string", rs[i])
			}
		default:
			b.WriteRune(rs[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated string")
}

func classify(word string, p Pos) Token {
	switch {
	case isKeyword(word):
		return Token{Kind: Keyword, Text: word, Pos: p}
	case isNumber(word):
		return Token{Kind: Number, Text: word, Pos: p}
	case strings.HasPrefix(word, "$") && IsIdent(word[1:]):
		return Token{Kind: Var, Text: word[1:], Pos: p}
	case IsIdent(word):
		return Token{Kind: Ident, Text: word, Pos: p}
	default:
		return Token{Kind: Path, Text: word, Pos: p}
	}
}

func isKeyword(w string) bool {
	for _, k := range Keywords {
		if w == k {
			return true
		}
	}
	return false
}

func isNumber(w string) bool {
	if w == "" || len(w) > 9 {
		return false
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// IsIdent reports whether s is an identifier: letters, digits, '_' and '-',
// starting with a letter or '_'.
func IsIdent(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		letter := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || r == '_'
		tail := i > 0 && ((r >= '0' && r <= '9') || r == '-')
		if !letter && !tail {
			return false
		}
	}
	return true
}
