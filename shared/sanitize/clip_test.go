package sanitize_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/sanitize"
)

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "hello", 10, "hello"},
		{"exact", "hello", 5, "hello"},
		{"cut", "hello world", 5, "hello…"},
		{"zero", "hello", 0, "…"},
		{"negative", "hello", -1, "…"},
		{"empty", "", 0, ""},
		// Counted in runes, not bytes: "é" is two bytes, "日" three, "🙂" four.
		{"two-byte runes fit", "héllo", 5, "héllo"},
		{"two-byte rune at the cut", "héllo", 2, "hé…"},
		{"three-byte runes", "日本語のテキスト", 3, "日本語…"},
		{"four-byte runes", "🙂🙂🙂", 1, "🙂…"},
		{"multi-byte fits by runes, not by bytes", "日本語", 3, "日本語"},
		{"invalid UTF-8 is not split further", "a\xffb", 2, "a\xff…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sanitize.Clip(tt.s, tt.n); got != tt.want {
				t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}

func FuzzClip(f *testing.F) {
	for _, s := range []string{"", "hello world", "héllo", "日本語のテキスト", "🙂🙂🙂"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := sanitize.Clip(s, n)
		kept, cut := strings.CutSuffix(got, "…")
		if got == s {
			return
		}
		if !cut || !strings.HasPrefix(s, kept) {
			t.Fatalf("Clip(%q, %d) = %q: not a prefix of s followed by …", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q splits a rune", s, n, got)
		}
		if c := utf8.RuneCountInString(kept); c != max(n, 0) {
			t.Fatalf("Clip(%q, %d) kept %d runes", s, n, c)
		}
	})
}
