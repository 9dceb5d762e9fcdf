package schema

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// schema.gen.go is what go generate makes of the document today: the
// directive of doc.go, run to its standard output, gives the same bytes.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, "//go:generate "); ok {
			args = strings.Fields(strings.Replace(rest, " -o schema.gen.go", "", 1))
		}
	}
	if len(args) < 2 || args[0] != "go" {
		t.Fatalf("doc.go has no go:generate directive running go: %q", args)
	}
	cmd := exec.CommandContext(t.Context(), args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	got, err := os.ReadFile("schema.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("schema.gen.go is not what api/openapi.json gives: run go generate ./api/schema")
	}
}
