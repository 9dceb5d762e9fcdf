// Package sanitize removes what a failed tool's output must not carry into an
// agent's conversation (FR2 of the remote agents spec): file paths, tracebacks,
// module names, process ids. What is left is a plain, non-technical message; the
// tool call itself is untouched, so the agent can retry or try another way.
package sanitize

import (
	"regexp"
	"strings"
)

// Generic is the message every sanitised error starts with.
const Generic = "The operation encountered an error."

// maxDetail bounds the plain detail kept after the generic message.
const maxDetail = 200

var (
	traceback  = regexp.MustCompile(`(?s)Traceback \(most recent.*`)
	goroutine  = regexp.MustCompile(`(?s)goroutine \d+ \[[^\]]*\]:.*`)
	stackFrame = regexp.MustCompile(`(?m)^\s+(at |File ").*$`)
	paths      = regexp.MustCompile(`(?:[A-Za-z]:\\|~/|/)(?:Users|home|var|tmp|opt|usr|etc|root|private|srv|workspace|mnt|proc|app|src|data|agent-space|nix)(?:[/\\][^\s'"(),:;]*)?`)
	modules    = regexp.MustCompile(`\b(?:ModuleNotFoundError|ImportError|NameError|TypeError|ValueError|KeyError|AttributeError|RuntimeError|OSError|FileNotFoundError|PermissionError|SyntaxError|IndentationError|ZeroDivisionError|IndexError|[A-Z][A-Za-z]*Exception)\b:?`)
	pyModule   = regexp.MustCompile(`(?:No module named|cannot import name)\s+'?[\w.]+'?`)
	pids       = regexp.MustCompile(`(?i)\b(?:pid|process(?: id)?)[\s:=#]*\d+\b|\[\d{2,}\]`)
	goFiles    = regexp.MustCompile(`\b[\w./-]+\.(?:go|py|js|ts|rb|java|rs|c|cpp|sh):\d+(?::\d+)?`)
	spaces     = regexp.MustCompile(`\s+`)
)

// Error returns the sanitised form of a failed tool's output. Output already
// sanitised comes back as it was: the generic message is said once.
func Error(output string) string {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(output), Generic))
	s = traceback.ReplaceAllString(s, "")
	s = goroutine.ReplaceAllString(s, "")
	s = stackFrame.ReplaceAllString(s, "")
	s = pyModule.ReplaceAllString(s, "a required component is missing")
	s = goFiles.ReplaceAllString(s, "")
	s = paths.ReplaceAllString(s, "a file")
	s = modules.ReplaceAllString(s, "")
	s = pids.ReplaceAllString(s, "")
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	// What was removed can join what is left into a path ("/ho[12]me/"), and
	// whitespace made one space into a traceback's header: once more.
	s = paths.ReplaceAllString(traceback.ReplaceAllString(s, ""), "a file")
	s = strings.Trim(s, " :;,-")
	s = Clip(s, maxDetail)
	if s == "" {
		return Generic
	}
	return Generic + " " + s
}
