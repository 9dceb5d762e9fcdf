package systemtest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// TestStopButtonInterruptsTheTurn: an agent whose turn runs a command of
// minutes is stopped from the embed view's Stop button (shown while it
// works): the command is cut short, the agent is idle again at once, every
// viewer reads that it was stopped, and the next message gets an answer.
func TestStopButtonInterruptsTheTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.jsonl")
	pidFile := filepath.Join(dir, "sleep.pid")
	step, _ := json.Marshal(map[string]any{"text": "Working on it.", "tool_calls": []any{map[string]any{"name": "bash", "args": map[string]any{
		"command": "echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec sleep 300"}}}})
	if err := os.WriteFile(script, append(step, []byte("\n{\"text\":\"Back at it.\"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"))
	created := s.createReady(createBody("Do the long thing."))
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	id, tok := created.str("agent_id"), created.str("session_token")
	eventually(t, 30*time.Second, "the turn's command running", func() bool {
		_, err := os.Stat(pidFile)
		return err == nil
	})

	tab := browser(t)
	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(created.str("embed_url")),
		voidPoll(`(() => { const b = document.querySelector('[data-role="stop"]'); return !b.hidden && b.checkVisibility(); })()`, 20*time.Second),
	)
	saveArtifact(t, "embed-stop.png", value(t, tab, chromedp.FullScreenshot(100)))
	inBrowser(t, tab, 30*time.Second,
		chromedp.Click(chromedp.CSS(`[data-role="stop"]`)),
		voidPoll(`document.querySelector('[data-role="interrupted"]') !== null`, 20*time.Second),
		voidPoll(`document.querySelector('[data-role="stop"]').hidden`, 20*time.Second),
	)
	eventually(t, 20*time.Second, "the agent idle again", func() bool { return s.alive(id, tok).str("state") == "idle" })
	evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e session.Event) bool {
		return e.Type == sandboxwire.TypeUserMessage && e.Data["interrupt"] == true
	}) {
		t.Errorf("no interrupt among the events: %+v", evs)
	}
	// The command was cut short, long before its 300 s.
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the command stopped", func() bool { return syscall.Kill(pid, 0) != nil })

	// The agent goes on: the next message is answered.
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "Something shorter, please."}); r.status != http.StatusOK {
		t.Fatalf("message: %d %s", r.status, r.raw)
	}
	msgs := s.waitAgentMessages(t, id, tok, 2)
	if last := msgs[len(msgs)-1].text; !strings.Contains(last, "Back at it.") {
		t.Errorf("after the Stop the agent said %q", last)
	}
	// An interrupt alone, with nothing in progress, stops nothing and is taken.
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"interrupt": true}); r.status != http.StatusOK {
		t.Errorf("an interrupt while idle: %d %s", r.status, r.raw)
	}
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"interrupt": true, "env_values": map[string]any{"A": "b"}}); r.status != http.StatusBadRequest {
		t.Errorf("an interrupt with env values: %d %s, want 400", r.status, r.raw)
	}
}
