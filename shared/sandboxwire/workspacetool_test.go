package sandboxwire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TruncateOutput keeps output within MaxToolOutputBytes, valid UTF-8, ending
// with the marker only when it cut.
func TestTruncateOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		cut  bool
	}{
		{"short", "hello", false},
		{"exactly the bound", strings.Repeat("a", MaxToolOutputBytes), false},
		{"one byte over", strings.Repeat("a", MaxToolOutputBytes+1), true},
		{"multi-byte runes across the cut", strings.Repeat("é", MaxToolOutputBytes), true},
	}
	for _, tt := range tests {
		got := TruncateOutput(tt.in)
		if len(got) > MaxToolOutputBytes || !utf8.ValidString(got) || strings.HasSuffix(got, ToolOutputTruncated) != tt.cut || (!tt.cut && got != tt.in) {
			t.Errorf("%s: %d bytes, cut %v", tt.name, len(got), strings.HasSuffix(got, ToolOutputTruncated))
		}
		if err := CheckToolResult(ToolResult{RequestID: "r", Tool: "read", Output: got}); err != nil {
			t.Errorf("%s: the truncated output is refused: %v", tt.name, err)
		}
	}
}
