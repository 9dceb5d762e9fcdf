package eventview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

func TestPublicHidesWhatViewersMustNotSee(t *testing.T) {
	env := Public(session.Event{Type: sandboxwire.TypeEnvSubmitted, Data: map[string]any{"keys": []any{"A"}, "ref": "sessions/x/env/y.json"}})
	if _, ok := env["ref"]; ok || env["keys"] == nil {
		t.Errorf("env.submitted: %v", env)
	}
	raw := "Traceback (most recent call last):\n  File \"/srv/app/handlers.py\", line 12, in run\nKeyError: 'token'"
	call := Public(session.Event{Type: "tool.call", Data: map[string]any{"tool": "bash", "is_error": true, "output": raw}})
	if out := call["output"].(string); strings.Contains(out, "/srv/app") || strings.Contains(out, "Traceback") {
		t.Errorf("tool error not sanitised: %q", out)
	}
	ok := Public(session.Event{Type: "tool.call", Data: map[string]any{"tool": "read", "is_error": false, "output": "/srv/app/handlers.py: 12 lines"}})
	if ok["output"] != "/srv/app/handlers.py: 12 lines" {
		t.Errorf("a successful output was changed: %v", ok["output"])
	}
	msg := Public(session.Event{Type: sandboxwire.TypeUserMessage, Data: map[string]any{"text": "see", "attachments": []any{map[string]any{"key": "sessions/x/attachments/k/a.txt", "name": "a.txt", "size_bytes": 3.0}}}})
	att := msg["attachments"].([]any)[0].(map[string]any)
	if _, ok := att["key"]; ok || att["name"] != "a.txt" {
		t.Errorf("attachment: %v", att)
	}
	// An agent message's HTML is the one rendered as it was appended (not
	// rendered again per reader), never an html of its data.
	kept := Public(session.Event{Type: sandboxwire.TypeAgentMessage, Data: map[string]any{"text": "**a**", "html": "<script>x</script>"}, HTML: "<p>kept</p>"})
	if kept["html"] != "<p>kept</p>" {
		t.Errorf("agent message html %q, want the one kept at append", kept["html"])
	}
	late := Public(session.Event{Type: sandboxwire.TypeAgentMessage, Data: map[string]any{"text": "**a**", "html": "<script>x</script>"}})
	if late["html"] != "<p><strong>a</strong></p>\n" {
		t.Errorf("agent message without kept HTML: html %q, want it rendered", late["html"])
	}
	// The event itself is not changed.
	e := session.Event{Type: sandboxwire.TypeEnvSubmitted, Data: map[string]any{"ref": "r"}}
	Public(e)
	if e.Data["ref"] != "r" {
		t.Error("Public changed the stored event")
	}
}

// TestPublicHidesObjectKeys: viewers never see where outputs are kept (object
// keys and prefixes), only what they are.
func TestPublicHidesObjectKeys(t *testing.T) {
	ver, err := session.NewEvent(sandboxwire.OutputVerification{Tool: "verify", ToolCallID: "c1", Folder: ".proliferate/verify",
		Prefix: "sessions/s/tools/verify/ab/", Files: []sandboxwire.VerifiedFile{{Path: "shot.png", Key: "sessions/s/tools/verify/ab/shot.png", SizeBytes: 9}},
		FileCount: 1, TotalBytes: 9})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := session.NewEvent(sandboxwire.OutputSnapshot{Tool: "save_snapshot", ToolCallID: "c2", SnapshotKey: "snapshots/session/s/x.tar.gz", Target: "session", SizeBytes: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []session.Event{ver, snap} {
		out := Public(e)
		raw := fmt.Sprint(out)
		if strings.Contains(raw, "sessions/") || strings.Contains(raw, "snapshots/") {
			t.Errorf("%s shows an object key: %v", e.Type, out)
		}
	}
	if out := Public(ver); out["file_count"] == nil || out["files"].([]any)[0].(map[string]any)["path"] != "shot.png" {
		t.Errorf("verification lost what it is: %v", out)
	}
	if out := Public(snap); out["target"] != "session" || out["size_bytes"] == nil {
		t.Errorf("snapshot lost what it is: %v", out)
	}
}

// An agent message's Markdown comes as sanitised HTML too, besides its text;
// what a sandbox sends as html is never passed on.
func TestPublicRendersAgentMarkdown(t *testing.T) {
	text := "Done: **bold**\n\n- one\n- two\n\n<script>alert(1)</script> [x](javascript:alert(1))"
	out := Public(session.Event{Type: sandboxwire.TypeAgentMessage, Data: map[string]any{"text": text, "html": "<img src=x onerror=alert(1)>", "tool_calls": 0.0}})
	html, _ := out["html"].(string)
	if out["text"] != text || !strings.Contains(html, "<strong>bold</strong>") || !strings.Contains(html, "<li>one</li>") {
		t.Errorf("agent message: %v", out)
	}
	for _, bad := range []string{"<script", "<img", "javascript:"} {
		if strings.Contains(html, bad) {
			t.Errorf("html has %s: %q", bad, html)
		}
	}
	empty := Public(session.Event{Type: sandboxwire.TypeAgentMessage, Data: map[string]any{"text": "", "tool_calls": 1.0}})
	if _, ok := empty["html"]; ok {
		t.Errorf("an empty message has html: %v", empty)
	}
	for _, typ := range sandboxwire.SandboxTypes {
		if typ == sandboxwire.TypeAgentMessage {
			continue
		}
		if out := Public(session.Event{Type: typ, Data: map[string]any{"text": "**x**", "html": "<img src=x onerror=alert(1)>"}}); out["html"] != nil {
			t.Errorf("%s passes a sandbox's html on: %v", typ, out)
		}
	}
}
