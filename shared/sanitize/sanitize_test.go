package sanitize_test

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/sanitize"
)

func TestError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		gone  []string
		keeps string
	}{
		{"python traceback", "Traceback (most recent call last):\n  File \"/home/app/run.py\", line 3, in <module>\n    import foo\nModuleNotFoundError: No module named 'foo'",
			[]string{"Traceback", "/home/app", "run.py", "ModuleNotFoundError", "foo"}, ""},
		{"paths", "open /Users/ana/secret/config.yaml: permission denied", []string{"/Users", "ana", "config.yaml"}, "permission denied"},
		{"var and tmp", "cannot write /var/lib/x and /tmp/y.txt", []string{"/var/lib", "/tmp/y"}, "cannot write"},
		{"pid", "process 4242 killed (pid 4242)", []string{"4242"}, "killed"},
		{"import error", "ImportError: cannot import name 'Thing' from 'lib'", []string{"ImportError", "Thing"}, ""},
		{"go panic", "panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n\t/workspace/main.go:12 +0x1d", []string{"goroutine", "main.go", "/workspace"}, "boom"},
		{"plain", "the server answered 503", nil, "the server answered 503"},
	}
	for _, tt := range tests {
		got := sanitize.Error(tt.in)
		if !strings.HasPrefix(got, sanitize.Generic) {
			t.Errorf("%s: %q lacks the generic message", tt.name, got)
		}
		for _, g := range tt.gone {
			if strings.Contains(got, g) {
				t.Errorf("%s: %q still holds %q", tt.name, got, g)
			}
		}
		if tt.keeps != "" && !strings.Contains(got, tt.keeps) {
			t.Errorf("%s: %q lost %q", tt.name, got, tt.keeps)
		}
	}
	// Sanitised twice (a tool's error passed on by another layer), the
	// generic message is said once.
	once := sanitize.Error("open /home/x/config.yaml: permission denied")
	if twice := sanitize.Error(once); twice != once || strings.Count(twice, sanitize.Generic) != 1 {
		t.Errorf("sanitised twice: %q, once: %q", twice, once)
	}
	if got := sanitize.Error(sanitize.Generic); got != sanitize.Generic {
		t.Errorf("the generic message alone: %q", got)
	}
	if got := sanitize.Error(strings.Repeat("word ", 200)); len(got) > 300 {
		t.Errorf("detail not bounded: %d bytes", len(got))
	}
}

func FuzzError(f *testing.F) {
	f.Add("Traceback (most recent call last):\n File \"/home/x.py\"")
	f.Add("/ho[12]me/x Trace[12]back (most recent call last)")
	f.Fuzz(func(t *testing.T, s string) {
		got := sanitize.Error(s)
		if !strings.HasPrefix(got, sanitize.Generic) || strings.Contains(got, "/home/") || strings.Contains(got, "Traceback (most recent") {
			t.Fatalf("Error(%q) = %q", s, got)
		}
	})
}
