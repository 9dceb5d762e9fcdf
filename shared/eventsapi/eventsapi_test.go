package eventsapi

import (
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
	// The event itself is not changed.
	e := session.Event{Type: sandboxwire.TypeEnvSubmitted, Data: map[string]any{"ref": "r"}}
	Public(e)
	if e.Data["ref"] != "r" {
		t.Error("Public changed the stored event")
	}
}
