package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/sandbox/redact"
)

func TestString(t *testing.T) {
	t.Parallel()
	s := redact.New("rsb_abcdefghijklmnop", "short", "sk-ant-123456789")
	s.Add("sk-ant-123456789-longer") // holds another secret: hidden whole
	tests := []struct{ in, want string }{
		{"token rsb_abcdefghijklmnop here", "token [redacted] here"},
		{"SANDBOX_MCP_AUTH_TOKEN=rsb_abcdefghijklmnop\x00ANTHROPIC_API_KEY=sk-ant-123456789\x00", "SANDBOX_MCP_AUTH_TOKEN=[redacted]\x00ANTHROPIC_API_KEY=[redacted]\x00"},
		{"key sk-ant-123456789-longer.", "key [redacted]."},
		{"a short value stays: short", "a short value stays: short"},
		{"nothing secret", "nothing secret"},
	}
	for _, tt := range tests {
		if got := s.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var none *redact.Secrets
	if none.String("rsb_abcdefghijklmnop") != "rsb_abcdefghijklmnop" {
		t.Error("the nil set redacted")
	}
	none.Add("x") // no panic
}

// A secret with characters JSON escapes is found in a JSON document too, and
// the document stays valid.
func TestJSON(t *testing.T) {
	t.Parallel()
	secret := `p"a\ss<w>&rd-é`
	s := redact.New(secret)
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(map[string]string{"output": "the value is " + secret + "!"}); err != nil {
			t.Fatal(err)
		}
		out := s.JSON(b.Bytes())
		var back map[string]string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("redacted JSON %s: %v", out, err)
		}
		if back["output"] != "the value is [redacted]!" {
			t.Errorf("escape HTML %v: %q", html, back["output"])
		}
	}
}

func TestWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := redact.New("rbc_0123456789").Writer(&b)
	line := `{"msg":"exchange rbc_0123456789 refused"}` + "\n"
	if n, err := w.Write([]byte(line)); err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got := b.String(); strings.Contains(got, "rbc_0123456789") || !strings.Contains(got, "[redacted]") {
		t.Errorf("wrote %q", got)
	}
}

func FuzzString(f *testing.F) {
	f.Add("rsb_abcdefghijklmnop", "x rsb_abcdefghijklmnop y")
	f.Fuzz(func(t *testing.T, secret, text string) {
		if len(secret) < redact.MinLen || strings.Contains(redact.Mark, secret) {
			return
		}
		if got := redact.New(secret).String(text); strings.Contains(got, secret) {
			t.Fatalf("String(%q) with %q kept it: %q", text, secret, got)
		}
	})
}

// streamed passes text through a Stream of s in pieces of n bytes and
// returns what came out of each, the flush last.
func streamed(s *redact.Secrets, text string, n int) []string {
	st := s.Stream()
	var outs []string
	for len(text) > 0 {
		k := min(n, len(text))
		outs = append(outs, st.Next(text[:k]))
		text = text[k:]
	}
	return append(outs, st.Flush())
}

// TestStream: a secret split across pieces, at any point, never comes out;
// what comes out is, piece after piece, the text as String redacts it, cut
// between characters.
func TestStream(t *testing.T) {
	t.Parallel()
	s := redact.New("rsb_abcdefghijklmnop", "sk-ant-123456789", "sk-ant-123456789-longer", "日本語のひみつです")
	texts := []string{
		"token rsb_abcdefghijklmnop here",
		"rsb_abcdefghijklmnop",
		"key sk-ant-123456789-longer. and sk-ant-123456789 alone, sk-ant-123456789-long but not longer",
		"almost rsb_abcdefghijklmno, rsb_rsb_abcdefghijklmnop, sk-ant-sk-ant-123456789!",
		"日本語のひみつです、日本語のひみつで、日本語",
		"nothing secret at all",
		"",
	}
	for _, text := range texts {
		want := s.String(text)
		for n := 1; n <= len(text)+1; n++ {
			outs := streamed(s, text, n)
			if got := strings.Join(outs, ""); got != want {
				t.Errorf("%q in pieces of %d: %q, want %q", text, n, got, want)
			}
			for _, out := range outs {
				if !utf8.ValidString(out) {
					t.Errorf("%q in pieces of %d: %q cuts a character", text, n, out)
				}
			}
		}
	}
	// A text that cannot begin a secret goes out as it comes.
	st := s.Stream()
	if got := st.Next("Hello, "); got != "Hello, " {
		t.Errorf("Next = %q", got)
	}
	if got := st.Next("rsb_abc"); got != "" {
		t.Errorf("the beginning of a secret came out: %q", got)
	}
	if got := st.Next("d."); got != "rsb_abcd." {
		t.Errorf("Next = %q once it is no secret", got)
	}
	var none *redact.Secrets
	if got := strings.Join(streamed(none, "rsb_abcdefghijklmnop", 3), "|"); got != "rsb|_ab|cde|fgh|ijk|lmn|op|" {
		t.Errorf("the nil set streamed %q", got)
	}
}

func FuzzStream(f *testing.F) {
	f.Add("rsb_abcdefghijklmnop", "x rsb_abcdefghijklmnop y", 3)
	f.Add("aaaaaaaa", "aaaaaaaaaaaaaaaaa", 5)
	f.Fuzz(func(t *testing.T, secret, text string, n int) {
		if len(secret) < redact.MinLen || strings.Contains(redact.Mark, secret) || n < 1 {
			return
		}
		s := redact.New(secret)
		got := strings.Join(streamed(s, text, n), "")
		if want := s.String(text); got != want {
			t.Fatalf("%q in pieces of %d with %q: %q, want %q", text, n, secret, got, want)
		}
	})
}
