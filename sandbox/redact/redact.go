// Package redact hides the secret values a sandbox knows (its token and
// bootstrap code, any key it read, the env values its user submitted) from
// what it lets out: tool output before the model and the events see it, every
// event it appends, and its log lines. It is defence in depth: the secrets are
// kept out of the tools' reach in the first place (package toolenv), and what
// is redacted here is only what slipped through verbatim (an encoding of a
// secret is not recognised).
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mark replaces every secret value.
const Mark = "[redacted]"

// MinLen is the shortest value redacted: shorter ones ("1", "dev", "true")
// are no secrets worth the noise of replacing them wherever they occur.
const MinLen = 8

// Secrets is the set of secret values to hide; safe for concurrent use. The
// nil *Secrets hides nothing.
type Secrets struct {
	mu     sync.RWMutex
	values []string // longest first, so that a secret is hidden whole
	forms  [][]byte // values and their JSON-escaped forms, longest first
}

// New returns a set holding values.
func New(values ...string) *Secrets {
	s := &Secrets{}
	s.Add(values...)
	return s
}

// Add adds values to hide; those shorter than MinLen are ignored.
func (s *Secrets) Add(values ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) < MinLen || slices.Contains(s.values, v) {
			continue
		}
		s.values = append(s.values, v)
		for _, form := range jsonForms(v) {
			if !slices.ContainsFunc(s.forms, func(f []byte) bool { return string(f) == form }) {
				s.forms = append(s.forms, []byte(form))
			}
		}
	}
	slices.SortFunc(s.values, func(a, b string) int { return len(b) - len(a) })
	slices.SortFunc(s.forms, func(a, b []byte) int { return len(b) - len(a) })
}

// String returns in with every secret replaced by Mark.
func (s *Secrets) String(in string) string {
	if s == nil {
		return in
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.values {
		in = strings.ReplaceAll(in, v, Mark)
	}
	return in
}

// JSON returns raw, a JSON document, with every secret replaced by Mark, as
// written or as JSON escapes it inside a string (Mark needs no escaping, so
// the document stays valid).
func (s *Secrets) JSON(raw []byte) []byte {
	if s == nil {
		return raw
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.forms {
		raw = bytes.ReplaceAll(raw, f, []byte(Mark))
	}
	return raw
}

// Stream hides the secrets of a text that arrives in pieces (a model's reply
// as it streams), where redacting each piece alone would let out a secret
// split across two. It holds back the end of what it was given while that
// end could begin a secret, and a secret it would otherwise cut; so what it
// lets out never holds a secret, and all of it, once flushed, is the whole
// text as String redacts it. Not safe for concurrent use.
type Stream struct {
	s       *Secrets
	pending string
}

// Stream returns a Stream hiding s's secrets (none for the nil set).
func (s *Secrets) Stream() *Stream { return &Stream{s: s} }

// Next takes the next piece of the text and returns what of the text so far
// can go out now, its secrets hidden ("" when it all waits for more).
func (st *Stream) Next(piece string) string {
	st.pending += piece
	cut := st.s.cut(st.pending)
	out := st.s.String(st.pending[:cut])
	st.pending = st.pending[cut:]
	return out
}

// Flush returns what was held back, its secrets hidden: the text is complete.
func (st *Stream) Flush() string {
	out := st.s.String(st.pending)
	st.pending = ""
	return out
}

// cut returns how much of text can be redacted now, apart from what may
// follow it: up to where its end could begin a secret, but not inside a
// secret it holds, nor inside a character.
func (s *Secrets) cut(text string) int {
	cut := len(text)
	if s != nil {
		s.mu.RLock()
		defer s.mu.RUnlock()
		// Not past the earliest end of text that begins a secret: the rest of
		// the secret may follow.
		for _, v := range s.values {
			for i := max(0, len(text)-len(v)+1); i < cut; i++ {
				if strings.HasPrefix(v, text[i:]) {
					cut = i
					break
				}
			}
		}
		// Before any secret the cut would split (each move may split another).
		for moved := true; moved; {
			moved = false
			for _, v := range s.values {
				if i := splitAt(text, v, cut); i >= 0 {
					cut, moved = i, true
				}
			}
		}
	}
	for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut--
	}
	if cut == len(text) && cut > 0 {
		last := cut - 1
		for last > 0 && !utf8.RuneStart(text[last]) {
			last--
		}
		if !utf8.FullRuneInString(text[last:]) {
			cut = last
		}
	}
	return cut
}

// splitAt returns where an occurrence of v in text that cut splits begins,
// or -1 if cut splits none.
func splitAt(text, v string, cut int) int {
	for from := 0; from < cut; {
		i := strings.Index(text[from:], v)
		if i < 0 || from+i >= cut {
			return -1
		}
		if from+i+len(v) > cut {
			return from + i
		}
		from += i + 1
	}
	return -1
}

// Writer returns a writer that redacts each write before passing it to w: for
// writers that get whole lines in one write, such as a log/slog handler's.
func (s *Secrets) Writer(w io.Writer) io.Writer {
	if s == nil {
		return w
	}
	return &writer{s: s, w: w}
}

type writer struct {
	s *Secrets
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if _, err := w.w.Write(w.s.JSON(bytes.Clone(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// jsonForms are v as written and as it appears inside a JSON string, with
// and without HTML characters escaped (encoders differ).
func jsonForms(v string) []string {
	forms := []string{v}
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(v) // a string always encodes
		raw := bytes.TrimSpace(b.Bytes())
		forms = append(forms, string(raw[1:len(raw)-1]))
	}
	return forms
}
