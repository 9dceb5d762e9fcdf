package systemtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// lifecycle are the event types the platform records an agent's life with.
var lifecycle = []string{sandboxwire.TypeAgentCreated, sandboxwire.TypeAgentReady, sandboxwire.TypeAgentEnded, sandboxwire.TypeAgentFailed}

func withSandboxEnv(env ...string) option {
	return func(o *devserver.Options) { o.SandboxEnv = append(o.SandboxEnv, env...) }
}

// events waits until the session has at least n events besides its
// workspace's provisioning (workspace.*, see workspace_test.go) and the
// platform's record of its life (agent.created, agent.ready, agent.ended,
// agent.failed), and returns those.
func (s *stack) events(t *testing.T, id string, n int) []session.Event {
	t.Helper()
	var evs []session.Event
	eventually(t, 15*time.Second, "agent events", func() bool {
		all, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		evs = slices.DeleteFunc(all, func(e session.Event) bool {
			return strings.HasPrefix(e.Type, "workspace.") || slices.Contains(lifecycle, e.Type)
		})
		return err == nil && len(evs) >= n
	})
	return evs
}

// Without a configured model, the agent still answers the initial prompt, with
// the scripted provider, and says plainly that no LLM is configured.
func TestAgentAnswersInitialPrompt(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	evs := s.events(t, id, 3)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type+":"+fmt.Sprint(e.Data["state"]))
	}
	if strings.Join(types, " ") != "state.changed:working agent.message:<nil> state.changed:idle" {
		t.Errorf("events %v", types)
	}
	msg := evs[1]
	if !strings.Contains(msg.Data["text"].(string), "no LLM is configured") || !strings.Contains(msg.Data["text"].(string), "Hello") {
		t.Errorf("reply %+v", msg)
	}
	eventually(t, 10*time.Second, "agent idle", func() bool { return s.alive(id, tok).str("state") == "idle" })
}

// FR2: a failing tool's output reaches the events (and the model) sanitised.
func TestToolErrorsAreSanitised(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(script, []byte(`{"text":"Let me look.","tool_calls":[{"name":"bash","args":{"command":"cat /home/nobody/secret/config.yaml"}}]}`+"\n"+`{"text":"I could not read it."}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script))
	id, _ := s.mustCreate()
	evs := s.events(t, id, 5) // working, message, tool call, message, idle
	var call, last *session.Event
	for i := range evs {
		switch evs[i].Type {
		case "tool.call":
			call = &evs[i]
		case "agent.message":
			last = &evs[i]
		}
	}
	if call == nil {
		t.Fatalf("no tool.call event in %+v", evs)
	}
	out, _ := call.Data["output"].(string)
	if call.Data["is_error"] != true || !strings.HasPrefix(out, "The operation encountered an error.") ||
		strings.Contains(out, "/home/nobody") || strings.Contains(out, "config.yaml") {
		t.Errorf("tool error not sanitised: %+v", call.Data)
	}
	if last == nil || last.Data["text"] != "I could not read it." {
		t.Errorf("the agent did not go on after the failure: %+v", last)
	}
}

// A session that spends its token budget is stopped with a clear reason.
func TestTokenLimitStopsSession(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_TOKEN_LIMIT=5"))
	id, tok := s.mustCreate()
	eventually(t, 15*time.Second, "session ended", func() bool { return s.alive(id, tok).str("state") == "ended" })
	got, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || got.Reason != session.ReasonTokenLimit {
		t.Errorf("session %+v, %v", got, err)
	}
}

// A user's message (an inbox event) gets its own answer, after the first one.
func TestAgentAnswersUserMessages(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	s.events(t, id, 1)
	eventually(t, 10*time.Second, "agent idle", func() bool { return s.alive(id, tok).str("state") == "idle" })
	if _, err := s.srv.Env.SessionStore().AppendEvents(t.Context(), id, 1, []session.Event{{Type: sandboxwire.TypeUserMessage, Data: map[string]any{"text": "how are you today"}}}); err != nil {
		t.Fatal(err)
	}
	var reply *session.Event
	// Appended straight to the store, nobody pushes it: the sandbox finds it
	// at its next safety read of the inbox (every 10 s while pushed).
	eventually(t, 30*time.Second, "answer to the user message", func() bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		for i := range evs {
			if text, _ := evs[i].Data["text"].(string); evs[i].Type == "agent.message" && strings.Contains(text, "how are you today") {
				reply = &evs[i]
				return true
			}
		}
		return false
	})
	if reply.Seq < 3 {
		t.Errorf("reply at seq %d, before the user message", reply.Seq)
	}
}

// withoutModel gives sandboxes no RA_LLM_PROVIDER.
func withoutModel() option {
	return func(o *devserver.Options) { o.SandboxEnv = nil }
}
