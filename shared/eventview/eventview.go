// Package eventview is what an agent's viewers and apps see of its events
// (Public), and how one is written to them (Message): on the event stream
// (package eventsapi) and pushed to viewers (package viewerpush) alike.
package eventview

import (
	"github.com/remote-agents/remote-agents/shared/markdown"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Message is an event as its readers get it: the data of one SSE event,
// one event of a viewer's frame.
type Message struct {
	Seq  int64          `json:"seq"`
	Type string         `json:"type"`
	At   string         `json:"at"`
	Data map[string]any `json:"data,omitempty"`
}

// Public is what viewers may see of an event: errors sanitised (FR2), internal
// references (object keys, env value refs) dropped. An agent message has its
// text also as sanitised HTML, rendered from Markdown (html) when the
// platform appended it (session.Event.HTML), or here if it was too long to
// keep; an html field that came in the event's data is dropped.
func Public(e session.Event) map[string]any {
	out := make(map[string]any, len(e.Data))
	for k, v := range e.Data {
		out[k] = v
	}
	// html is the platform's, never the sandbox's (the embed view inserts it).
	delete(out, "html")
	switch e.Type {
	case sandboxwire.TypeAgentMessage:
		if e.HTML != "" {
			out["html"] = e.HTML
		} else if s, ok := out["text"].(string); ok && s != "" {
			out["html"] = markdown.HTML(s)
		}
	case sandboxwire.TypeEnvSubmitted:
		delete(out, "ref")
	case sandboxwire.TypeWorkspaceToolRequest:
		// Its arguments are shown with its result (workspace.tool), as the
		// sandbox redacted them.
		delete(out, "args")
	case sandboxwire.TypeToolCall, sandboxwire.TypeWorkspaceTool:
		if out["is_error"] == true {
			if s, ok := out["output"].(string); ok {
				out["output"] = sanitize.Error(s)
			}
		}
	case sandboxwire.TypeAgentError:
		if s, ok := out["text"].(string); ok {
			out["text"] = sanitize.Error(s)
		}
	case sandboxwire.TypeOutputVerification, sandboxwire.TypeUserMessage:
		// Their files and attachments show what they are, never the keys
		// they are kept under (either list, whichever event holds it).
		delete(out, "prefix")
		if files, ok := out["files"].([]any); ok {
			out["files"] = only(files, "path", "size_bytes")
		}
		if atts, ok := out["attachments"].([]any); ok {
			out["attachments"] = only(atts, "name", "size_bytes")
		}
	case sandboxwire.TypeOutputSnapshot:
		delete(out, "snapshot_key")
	}
	return out
}

// only keeps the named fields of each object of list (file names and sizes,
// not the object keys they are kept under).
func only(list []any, fields ...string) []any {
	var kept []any
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		k := make(map[string]any, len(fields))
		for _, f := range fields {
			k[f] = m[f]
		}
		kept = append(kept, k)
	}
	return kept
}
