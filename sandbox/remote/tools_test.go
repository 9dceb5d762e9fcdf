package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
)

// chatModel is a local model server speaking the chat completions wire
// format (an OpenAI-compatible server's), whole or streamed, recording the
// tools each request offers: to the initial prompt it answers with a call of
// bash, to a tool result with text, to the user's message with an echo of it.
type chatModel struct {
	mu    sync.Mutex
	tools [][]string
	// result is the content of the tool result sent back.
	result string
}

func (m *chatModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var names []string
	for _, t := range body.Tools {
		names = append(names, t.Function.Name)
	}
	last := body.Messages[len(body.Messages)-1]
	m.mu.Lock()
	m.tools = append(m.tools, names)
	if last.Role == "tool" {
		m.result, _ = last.Content.(string)
	}
	m.mu.Unlock()
	message := `{"role":"assistant","content":"done"}`
	finish := "stop"
	text, _ := last.Content.(string)
	switch {
	case last.Role == "user" && strings.Contains(text, "Say hello"):
		message = `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"id\"}"}}]}`
		finish = "tool_calls"
	case last.Role == "user":
		message = fmt.Sprintf(`{"role":"assistant","content":%q}`, "you said: "+text)
	}
	if body.Stream { // the whole message in one chunk
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n",
			fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%q}]}`, message, finish))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, message, finish)
}

// TestTheModelSeesOnlyTheTypesTools: a sandbox whose spec names its agent
// type's tools (read and grep) offers the model exactly those and the
// contract tools of its session type, and answers a call of bash with the
// spec's words.
func TestTheModelSeesOnlyTheTypesTools(t *testing.T) {
	gw := &platform{tools: []string{"read", "grep"}}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	model := &chatModel{}
	modelSrv := httptest.NewServer(model)
	defer modelSrv.Close()
	ws := t.TempDir()
	c := Config{
		SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws,
		Heartbeat: 5 * time.Millisecond, Poll: 5 * time.Millisecond, EnvFile: filepath.Join(ws, ".proliferate_env.json"),
		LLM: agentconfig.LLM{Provider: "openai-compatible", BaseURL: modelSrv.URL + "/v1", Model: "m"}, ContextWindow: 1000,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("Run: %v", err)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.tools) < 2 {
		t.Fatalf("%d model requests", len(model.tools))
	}
	// The contract tools of a coding session, and the question tool, besides
	// the type's.
	want := []string{"ask_user", "automation_complete", "grep", "read", "request_env_variables", "save_snapshot", "verify"}
	for i, got := range model.tools {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("request %d offers %v, want %v", i, got, want)
		}
	}
	// The chat completions format has no error flag: the adapter marks a
	// failed tool's result with "ERROR: " (providers/openai.go).
	if want := "ERROR: Tool 'bash' is not enabled for this agent type"; model.result != want {
		t.Errorf("the bash call came back as %q, want %q", model.result, want)
	}
}
