package policy

import (
	"path"
	"strconv"
	"strings"
)

// wrappers run the command that follows them.
var wrappers = map[string]bool{
	"env": true, "nohup": true, "time": true, "nice": true, "command": true, "exec": true,
	"builtin": true, "timeout": true, "stdbuf": true, "xargs": true, "doas": true, "busybox": true,
}

// reserved are the shell's words that may start a command before the one it
// runs (! rm, then rm, do rm, coproc rm).
var reserved = map[string]bool{
	"!": true, "if": true, "then": true, "else": true, "elif": true, "do": true, "while": true, "until": true, "coproc": true,
}

// optionWithValue are wrapper options followed by a value (nice -n 5, env -u VAR,
// timeout -s KILL, xargs -I {} …).
var optionWithValue = map[string]bool{
	"-n": true, "-u": true, "-s": true, "-k": true, "-I": true, "-P": true, "-L": true,
	"-C": true, "-S": true, "-o": true, "-e": true, "-a": true,
}

// shells run a script given with -c.
var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true}

// Commands returns every simple command a shell line would run, as a policy must
// see them: split at ; & && || | and newlines, with $(…) and `…` taken out, the
// scripts of bash -c (-ec, -lc…) and friends and of eval opened up, and
// wrappers (env, nohup, timeout …), reserved words (if, then, do, ! …) and
// leading VAR=value assignments removed.
func Commands(line string) []string {
	var out []string
	var visit func(string, int)
	visit = func(src string, depth int) {
		if depth > 8 {
			out = append(out, src) // absurd nesting: judged as written
			return
		}
		parts, subs := split(src)
		for _, s := range subs {
			visit(s, depth+1)
		}
		for _, part := range parts {
			words := fields(part)
			for len(words) > 0 && (isAssignment(words[0]) || wrappers[path.Base(words[0])] || reserved[words[0]]) {
				if reserved[words[0]] {
					words = words[1:]
					continue
				}
				words = dropWrapper(words)
			}
			if len(words) == 0 {
				continue
			}
			if words[0] == "eval" {
				visit(strings.Join(words[1:], " "), depth+1)
				continue
			}
			if shells[path.Base(words[0])] {
				if script, ok := dashC(words[1:]); ok {
					visit(script, depth+1)
					continue
				}
			}
			out = append(out, strings.Join(words, " "))
		}
	}
	visit(line, 0)
	return out
}

// dropWrapper removes one leading assignment or wrapper with its options (and
// timeout's duration).
func dropWrapper(words []string) []string {
	w := words[0]
	words = words[1:]
	if isAssignment(w) {
		return words
	}
	for len(words) > 0 && (strings.HasPrefix(words[0], "-") || isAssignment(words[0])) {
		if optionWithValue[words[0]] && len(words) > 1 {
			words = words[1:] // the option's value
		}
		words = words[1:]
	}
	if w == "timeout" && len(words) > 0 {
		words = words[1:] // the duration
	}
	return words
}

// dashC finds the script of a shell's arguments: the word after -c, or after
// a cluster of short options holding c (-ec, -lc), past a "--".
func dashC(args []string) (string, bool) {
	for i, a := range args {
		if a == "-c" || (len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'c')) {
			rest := args[i+1:]
			if len(rest) > 0 && rest[0] == "--" {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return "", false
			}
			return rest[0], true
		}
		if !strings.HasPrefix(a, "-") {
			return "", false
		}
	}
	return "", false
}

func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		digit := i > 0 && r >= '0' && r <= '9'
		if !letter && !digit {
			return false
		}
	}
	return true
}

// split cuts a line at unquoted separators and takes out command substitutions.
func split(line string) (parts, subs []string) {
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			parts = append(parts, s)
		}
		cur.Reset()
	}
	rs := []rune(line)
	var quote rune
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\\' && i+1 < len(rs):
			cur.WriteRune(r)
			cur.WriteRune(rs[i+1])
			i++
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			end := closing(rs, i+2)
			subs = append(subs, string(rs[i+2:end]))
			cur.WriteString("_")
			i = end
		case r == '`':
			end := i + 1
			for end < len(rs) && rs[end] != '`' {
				end++
			}
			subs = append(subs, string(rs[i+1:min(end, len(rs))]))
			cur.WriteString("_")
			i = end
		case quote == '"':
			if r == '"' {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == ';' || r == '&' || r == '|' || r == '\n' || r == '(' || r == ')' || r == '{' || r == '}':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return parts, subs
}

// closing finds the ) that closes a $( opened before i.
func closing(rs []rune, i int) int {
	depth := 1
	for ; i < len(rs); i++ {
		switch rs[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(rs)
}

// fields splits a simple command into words, removing quotes ($'…' and $"…"
// included; $'…' with its escapes decoded) and line continuations.
func fields(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '$' && i+1 < len(rs) && rs[i+1] == '\'':
			i = ansiC(rs, i+2, &cur)
			in = true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '"':
			quote, in = '"', true
			i++
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++ // a line continuation: nothing
		case r == '\\' && i+1 < len(rs):
			cur.WriteRune(rs[i+1])
			in = true
			i++
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// ansiC decodes a $'…' string whose text starts at rs[i] into b, and returns
// the index of its closing quote: \xHH, \NNN, \uHHHH, \UHHHHHHHH and the
// letter escapes, as bash reads them.
func ansiC(rs []rune, i int, b *strings.Builder) int {
	letters := map[rune]rune{'a': '\a', 'b': '\b', 'e': 0x1b, 'E': 0x1b, 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}
	number := func(j, most, base int) (rune, int) {
		v, n := 0, 0
		for ; n < most && j+n < len(rs); n++ {
			d, err := strconv.ParseInt(string(rs[j+n]), base, 8)
			if err != nil {
				break
			}
			v = v*base + int(d)
		}
		return rune(v), n
	}
	for ; i < len(rs); i++ {
		r := rs[i]
		if r == '\'' {
			return i
		}
		if r != '\\' || i+1 >= len(rs) {
			b.WriteRune(r)
			continue
		}
		i++
		e := rs[i]
		switch {
		case letters[e] != 0:
			b.WriteRune(letters[e])
		case e == 'x' || e == 'u' || e == 'U':
			most := map[rune]int{'x': 2, 'u': 4, 'U': 8}[e]
			v, n := number(i+1, most, 16)
			if n == 0 {
				b.WriteRune('\\')
				b.WriteRune(e)
				continue
			}
			b.WriteRune(v)
			i += n
		case e >= '0' && e <= '7':
			v, n := number(i, 3, 8)
			b.WriteRune(v)
			i += n - 1
		default:
			b.WriteRune(e) // \\, \', \" and anything else: the character
		}
	}
	return i
}
