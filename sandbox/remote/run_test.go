package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// platform plays the gateway's side of the sandbox channel for one session:
// it serves the spec, hands out one user message and one env value, and says
// stop once the agent has answered the message.
type platform struct {
	// guardrails, if set, replaces the spec's guardrails content.
	guardrails *string
	// env is the spec's persisted env values; envFile the sandbox's env file,
	// read into envAtReady when the sandbox reports ready.
	env map[string]string
	// tools are the spec's workspace tools (nil: every one).
	tools      []string
	envFile    string
	envAtReady string
	mu         sync.Mutex
	states     []sandboxwire.StatusReport
	events     []sandboxwire.Event
	answered   bool
	inboxes    int
	// calls lists the routes called, in order; spent says the bootstrap code
	// rbc_code was exchanged (for rsb_token).
	calls []string
	spent bool
	// noStop: the inbox never says stop, the message answered or not.
	noStop bool
}

func (p *platform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	route := strings.TrimPrefix(r.URL.Path, "/sandbox/s1/")
	p.calls = append(p.calls, route)
	if route == sandboxwire.RouteBootstrap && r.Header.Get("Authorization") == "Bearer rbc_code" && !p.spent {
		p.spent = true
		_ = json.NewEncoder(w).Encode(sandboxwire.BootstrapResponse{SandboxToken: "rsb_token", Generation: 1})
		return
	}
	if r.Header.Get("Authorization") != "Bearer rsb_token" {
		http.Error(w, `{"error_code":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	var out any = sandboxwire.Orders{State: sandboxwire.Working}
	switch route {
	case sandboxwire.RouteSpec:
		out = sandboxwire.Spec{SessionID: "s1", Generation: 1, InitialPrompt: "Say hello",
			Guardrails: sandboxwire.Guardrails{Content: "# Rules\nBe safe.", Hash: strings.Repeat("a", sandboxwire.GuardrailsHashLen)},
			Persona:    sandboxwire.Persona{Slug: "helper", Skill: "Helps."}, SessionType: "coding"}
		spec := out.(sandboxwire.Spec)
		if p.guardrails != nil {
			spec.Guardrails.Content = *p.guardrails
		}
		spec.Env, spec.Tools = p.env, p.tools
		out = spec
	case sandboxwire.RouteStatus:
		var in sandboxwire.StatusReport
		_ = json.NewDecoder(r.Body).Decode(&in)
		// As the platform does, an ended session's token is refused: a
		// report still on its way when the sandbox ended (a turn's idle,
		// its request cancelled) is not a state the session took.
		if n := len(p.states); n > 0 && p.states[n-1].State.Terminal() {
			http.Error(w, `{"error_code":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		p.states = append(p.states, in)
		if in.State == sandboxwire.Ready && p.envFile != "" {
			raw, _ := os.ReadFile(p.envFile)
			p.envAtReady = string(raw)
		}
	case sandboxwire.RouteEvents:
		var in sandboxwire.EventsRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		for _, e := range in.Events {
			p.events = append(p.events, e)
			if e.Type == sandboxwire.TypeAgentMessage && strings.Contains(string(e.Data), "how are you") {
				p.answered = true
			}
		}
		out = sandboxwire.EventsResponse{FirstSeq: 1, LastSeq: 1}
	case sandboxwire.RouteHeartbeat:
	case sandboxwire.RouteInbox:
		p.inboxes++
		orders := sandboxwire.Orders{State: sandboxwire.Idle, Next: 1}
		switch {
		case r.URL.Query().Get(sandboxwire.InboxAfter) == "0":
			orders.Messages = []sandboxwire.InboxMessage{{Seq: 1, Text: "how are you"}}
			orders.Env = map[string]string{"API_KEY": "secret"}
		case p.answered && !p.noStop:
			orders.Stop, orders.State = true, sandboxwire.Ending
		}
		out = orders
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// TestRunLivesASandboxLife runs remote mode against a gateway on httptest: it
// primes (guardrails first), reports ready with the guardrails' hash, answers
// the initial prompt and a user message, writes the env values, and ends when
// its inbox says stop.
func TestRunLivesASandboxLife(t *testing.T) {
	gw := &platform{}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	ws := t.TempDir()
	c := Config{
		SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws,
		Heartbeat: 5 * time.Millisecond, Poll: 5 * time.Millisecond, EnvFile: filepath.Join(ws, ".proliferate_env.json"),
		LLM: agentconfig.LLM{Provider: "scripted"}, ContextWindow: 1000,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Run: %v", err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if len(gw.states) < 2 || gw.states[0].State != sandboxwire.Ready || gw.states[0].GuardrailsHash != strings.Repeat("a", 64) {
		t.Fatalf("states %+v: want ready with the guardrails hash first", gw.states)
	}
	if last := gw.states[len(gw.states)-1]; last.State != sandboxwire.Ended || last.Reason != sandboxwire.ReasonShutdown {
		t.Errorf("last state %+v, want ended by shutdown", last)
	}
	var replies []string
	for _, e := range gw.events {
		if e.Type == sandboxwire.TypeAgentMessage {
			var m sandboxwire.AgentMessage
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
			replies = append(replies, m.Text)
		}
	}
	if len(replies) != 2 || !strings.Contains(replies[0], "Say hello") || !strings.Contains(replies[1], "how are you") ||
		!strings.HasPrefix(replies[1], llm.ScriptedNotice) {
		t.Errorf("replies %q: want the initial prompt's, then the message's", replies)
	}
	var primed []Message
	raw, err := os.ReadFile(filepath.Join(ws, ConversationFile))
	if err != nil || json.Unmarshal(raw, &primed) != nil || len(primed) != 2 || !strings.HasPrefix(primed[0].Content, "# Rules") {
		t.Errorf("conversation %s %v: want the guardrails first", raw, err)
	}
	env, err := os.ReadFile(c.EnvFile)
	if err != nil || !strings.Contains(string(env), `"API_KEY": "secret"`) {
		t.Errorf("env file %s %v", env, err)
	}
}

// TestRunWritesTheConfigurationsEnvBeforeReady: the env values the spec carries
// (persisted for the session's configuration) are merged into the env file
// before the sandbox reports ready, keeping what the file held; the model is
// told their keys, never their values.
func TestRunWritesTheConfigurationsEnvBeforeReady(t *testing.T) {
	ws := t.TempDir()
	envFile := filepath.Join(t.TempDir(), ".proliferate_env.json")
	if err := os.WriteFile(envFile, []byte(`{"OLD":"kept"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := &platform{env: map[string]string{"SAVED_KEY": "sv_secret", "OTHER": "o"}, envFile: envFile}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	c := Config{
		SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws,
		Heartbeat: 5 * time.Millisecond, Poll: 5 * time.Millisecond, EnvFile: envFile,
		LLM: agentconfig.LLM{Provider: "scripted"}, ContextWindow: 1000,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Run: %v", err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var atReady map[string]string
	if err := json.Unmarshal([]byte(gw.envAtReady), &atReady); err != nil || atReady["SAVED_KEY"] != "sv_secret" || atReady["OTHER"] != "o" || atReady["OLD"] != "kept" {
		t.Errorf("env file when ready: %q %v", gw.envAtReady, err)
	}
	if info, err := os.Stat(envFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v %v", info, err)
	}
	var primed []Message
	raw, err := os.ReadFile(filepath.Join(ws, ConversationFile))
	if err != nil || json.Unmarshal(raw, &primed) != nil || len(primed) != 2 {
		t.Fatalf("conversation %s %v", raw, err)
	}
	if !strings.Contains(primed[1].Content, "OTHER, SAVED_KEY") || !strings.Contains(primed[1].Content, envFile) || strings.Contains(string(raw), "sv_secret") {
		t.Errorf("first turn %q: want the saved keys and the env file named, no value", primed[1].Content)
	}
	for _, e := range gw.events {
		if strings.Contains(string(e.Data), "sv_secret") {
			t.Errorf("a saved value is in an event: %s", e.Data)
		}
	}
}

// TestRunStopsWhenItsTokenIsRefused: a sandbox whose token the gateway refuses
// (replaced, or its session over) stops at once, without reporting.
func TestRunStopsWhenItsTokenIsRefused(t *testing.T) {
	srv := httptest.NewServer(&platform{})
	defer srv.Close()
	c := Config{SessionID: "s1", Gateway: srv.URL, Token: "rsb_other", Workspace: t.TempDir(), Heartbeat: time.Millisecond, Poll: time.Millisecond}
	var auth *gateway.AuthError
	err := Run(t.Context(), c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !errors.As(err, &auth) {
		t.Fatalf("Run with a refused token: %v", err)
	}
}

// TestRunRefusesEmptyGuardrails (FR3.2): a spec whose guardrails are empty or
// blank primes nothing (no conversation file, no skill, no prompt), reports
// failed, and the sandbox stops.
func TestRunRefusesEmptyGuardrails(t *testing.T) {
	for _, content := range []string{"", "  \n\t\n"} {
		gw := &platform{guardrails: &content}
		srv := httptest.NewServer(gw)
		ws := t.TempDir()
		c := Config{SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws, Heartbeat: time.Millisecond, Poll: time.Millisecond,
			LLM: agentconfig.LLM{Provider: "scripted"}}
		err := Run(t.Context(), c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		srv.Close()
		if err == nil {
			t.Errorf("guardrails %q: Run primed anyway", content)
		}
		if len(gw.states) != 1 || gw.states[0].State != sandboxwire.Failed || gw.states[0].Reason != sandboxwire.ReasonError {
			t.Errorf("guardrails %q: states %+v, want one failed report", content, gw.states)
		}
		if len(gw.events) != 0 {
			t.Errorf("guardrails %q: the agent emitted %d events", content, len(gw.events))
		}
		if _, err := os.Stat(filepath.Join(ws, ConversationFile)); !os.IsNotExist(err) {
			t.Errorf("guardrails %q: a conversation was written (%v)", content, err)
		}
	}
}

// TestRunWithoutAModelDoesNotStart: ready means usable. A sandbox whose
// RA_LLM_PROVIDER names no model reports failed (model_unavailable), never
// ready, and stops; it does not fall back to the scripted provider by itself.
func TestRunWithoutAModelDoesNotStart(t *testing.T) {
	for _, llmCfg := range []agentconfig.LLM{{}, {Provider: "anthropic"}} { // none; one without its key
		gw := &platform{}
		srv := httptest.NewServer(gw)
		c := Config{SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: t.TempDir(), Heartbeat: time.Millisecond, Poll: time.Millisecond, LLM: llmCfg}
		err := Run(t.Context(), c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		srv.Close()
		if err == nil {
			t.Errorf("provider %q: Run started without a model", llmCfg.Provider)
		}
		if len(gw.states) != 1 || gw.states[0].State != sandboxwire.Failed || gw.states[0].Reason != sandboxwire.ReasonModelUnavailable {
			t.Errorf("provider %q: states %+v, want one failed report (model_unavailable)", llmCfg.Provider, gw.states)
		}
		if len(gw.events) != 0 {
			t.Errorf("provider %q: %d events", llmCfg.Provider, len(gw.events))
		}
	}
}

// A sandbox launched with a bootstrap code spends it before anything else and
// uses the token it gets for every call after.
func TestRunSpendsItsBootstrapCodeFirst(t *testing.T) {
	gw := &platform{}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	ws := t.TempDir()
	c := Config{
		SessionID: "s1", Gateway: srv.URL, BootstrapCode: "rbc_code", Workspace: ws,
		Heartbeat: 5 * time.Millisecond, Poll: 5 * time.Millisecond, EnvFile: filepath.Join(ws, ".proliferate_env.json"),
		LLM: agentconfig.LLM{Provider: "scripted"}, ContextWindow: 1000,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Run: %v", err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if len(gw.calls) < 3 || gw.calls[0] != sandboxwire.RouteBootstrap || gw.calls[1] != sandboxwire.RouteSpec || !gw.spent {
		t.Errorf("calls %v: want the bootstrap exchange first, then the spec with the token", gw.calls[:min(len(gw.calls), 3)])
	}
	if n := strings.Count(strings.Join(gw.calls, " "), sandboxwire.RouteBootstrap); n != 1 {
		t.Errorf("%d bootstrap exchanges, want 1", n)
	}

	// A code that is refused (spent already) stops the sandbox at once.
	gw.calls = nil
	gw.mu.Unlock()
	err := Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	gw.mu.Lock()
	var auth *gateway.AuthError
	if !errors.As(err, &auth) || len(gw.calls) != 1 {
		t.Errorf("Run with a spent code: %v after %v; want the refusal and no other call", err, gw.calls)
	}
}
