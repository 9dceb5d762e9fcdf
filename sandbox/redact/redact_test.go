package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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
