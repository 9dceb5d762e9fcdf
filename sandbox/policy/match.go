package policy

import (
	"path/filepath"
	"strings"
)

// MatchPath matches an absolute, clean path against a glob: * matches within one
// path segment, ** matches any number of segments (none included), ? one character.
func MatchPath(pattern, path string) bool {
	pattern = filepath.Clean(pattern)
	return matchSegments(strings.Split(pattern, "/"), strings.Split(filepath.Clean(path), "/"))
}

func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegments(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 || !wildcard(pat[0], segs[0], false) {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// MatchCommand matches a command line against a glob in which * matches any text,
// spaces included, and ? one character. Whitespace runs compare as one space.
func MatchCommand(pattern, command string) bool {
	return wildcard(strings.Join(strings.Fields(pattern), " "), strings.Join(strings.Fields(command), " "), true)
}

// MatchDomain matches a host against a domain: exact, or "*.example.com" for any
// subdomain of example.com.
func MatchDomain(pattern, host string) bool {
	pattern = strings.ToLower(pattern)
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == pattern
}

// wildcard matches s against a pattern of * and ?; * stops at '/' unless anyText.
func wildcard(pattern, s string, anyText bool) bool {
	p, t := []rune(pattern), []rune(s)
	var starP, starT = -1, 0
	i, j := 0, 0
	for j < len(t) {
		switch {
		case i < len(p) && (p[i] == '?' || p[i] == t[j]) && p[i] != '*':
			i++
			j++
		case i < len(p) && p[i] == '*':
			starP, starT = i, j
			i++
		case starP >= 0 && (anyText || t[starT] != '/'):
			starT++
			i, j = starP+1, starT
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}
