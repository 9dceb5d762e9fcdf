package cli_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/cli"
)

// call runs the agent's command line with args, in the environment of the test.
func call(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env, err := agentconfig.LoadEnv(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code, ok := cli.Main(t.Context(), env, args, &out, &errOut)
	if !ok {
		t.Fatalf("%v not handled", args)
	}
	return code, out.String(), errOut.String()
}

func TestExamples(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("../examples/*/Agentfile")
	if err != nil || len(dirs) < 4 {
		t.Fatalf("examples: %v, %v", dirs, err)
	}
	for _, src := range dirs {
		name := filepath.Base(filepath.Dir(src))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Run a copy: runs write their sessions beside the config.
			dir := filepath.Join(t.TempDir(), name)
			if err := os.CopyFS(dir, os.DirFS(filepath.Dir(src))); err != nil {
				t.Fatal(err)
			}
			af := filepath.Join(dir, "Agentfile")
			if code, out, errOut := call(t, "validate", af); code != cli.ExitOK || !strings.Contains(out, "is valid") {
				t.Errorf("validate: %d %q %q", code, out, errOut)
			}
			if code, out, _ := call(t, "inspect", af); code != cli.ExitOK || !strings.Contains(out, "steps:") {
				t.Errorf("inspect: %d %q", code, out)
			}
			if code, out, _ := call(t, "inspect", af, "--json"); code != cli.ExitOK || !strings.Contains(out, `"Steps"`) {
				t.Errorf("inspect --json: %d %q", code, out)
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected.txt"))
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := call(t, "run", af, "--config", filepath.Join(dir, "agent.json"), "--input", inputFor(dir))
			if code != cli.ExitOK || out != string(want) {
				t.Errorf("run: exit %d, stdout %q, want %q\nstderr:\n%s", code, out, want, errOut)
			}
			if !strings.Contains(errOut, "workflow complete") || !strings.Contains(errOut, "scripted provider") {
				t.Errorf("run events on stderr:\n%s", errOut)
			}
		})
	}
}

// inputFor returns one input each example accepts.
func inputFor(dir string) string {
	switch filepath.Base(dir) {
	case "loop-within":
		return "subject=streaming"
	case "multi-agent":
		return "plan=Adopt Fargate"
	case "goal-from-file":
		return "issue=Timeouts"
	case "sequential-vars":
		return "word_count=30"
	default:
		return "topic=Go"
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME w\nINPUT topic\nGOAL g \"about $topic\"\nRUN r USING g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "Bad")
	if err := os.WriteFile(bad, []byte("NAME w\nTASK x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"llm":{"provider":"palm"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing input", []string{"run", af}, cli.ExitUsage, "missing required input topic"},
		{"unknown input", []string{"run", af, "--input", "topic=x", "--input", "color=red"}, cli.ExitUsage, "unknown input color"},
		{"bad input flag", []string{"run", af, "--input", "novalue"}, cli.ExitUsage, "key=value"},
		{"syntax error", []string{"run", bad, "--input", "x=y"}, cli.ExitUsage, `Bad:2:1: unknown keyword "TASK"`},
		{"validate syntax error", []string{"validate", bad}, cli.ExitUsage, `unknown keyword "TASK"`},
		{"bad config", []string{"run", af, "--config", cfg, "--input", "topic=x"}, cli.ExitUsage, `llm.provider "palm"`},
		{"missing config", []string{"run", af, "--config", filepath.Join(dir, "nope.json")}, cli.ExitUsage, "no such file"},
		{"no Agentfile", []string{"run"}, cli.ExitUsage, "usage: agent run"},
		{"missing Agentfile", []string{"validate", filepath.Join(dir, "missing")}, cli.ExitUsage, "file not found"},
	}
	for _, tt := range tests {
		code, _, errOut := call(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d with %q", tt.name, code, errOut, tt.code, tt.want)
		}
	}
	// Without a provider, the scripted one says plainly that no LLM is set.
	plain := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(plain, []byte(`{"session":{"store":"sqlite","path":"state"},"telemetry":{"enabled":true,"protocol":"file","endpoint":"telemetry"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := call(t, "run", af, "--config", plain, "--input", "topic=Go")
	if code != cli.ExitOK || !strings.Contains(out, "no LLM is configured") {
		t.Errorf("run without a provider: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "sessions.db")); err != nil {
		t.Errorf("sqlite session store not written: %v (%s)", err, errOut)
	}
	lines, _ := filepath.Glob(filepath.Join(dir, "telemetry", "*.jsonl"))
	if len(lines) != 1 {
		t.Fatalf("telemetry files %v", lines)
	}
	raw, _ := os.ReadFile(lines[0])
	if !strings.Contains(string(raw), `"workflow_name":"w"`) || !strings.Contains(string(raw), `"input_tokens"`) || !strings.Contains(string(raw), `"role":"user"`) {
		t.Errorf("telemetry file:\n%s", raw)
	}
}

// A run that fails at its second goal resumes from there: the first goal is not
// asked again, its output is reused, and the session ends completed.
func TestResumeAfterFailure(t *testing.T) {
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME two-steps\nINPUT topic\nGOAL first \"research $topic\"\nGOAL second \"write using $first\"\nRUN r USING first, second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var prompts []string
	failing := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		prompt := body.Messages[0].Content[0].Text
		mu.Lock()
		prompts = append(prompts, prompt)
		fail := failing && strings.Contains(prompt, "Goal second")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if fail {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"boom"}}`))
			return
		}
		text := "facts about Go"
		if strings.Contains(prompt, "Goal second") {
			text = "essay from " + prompt[strings.Index(prompt, "using ")+6:]
		}
		resp, _ := json.Marshal(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "x",
			"content": []map[string]any{{"type": "text", "text": text}}, "stop_reason": "end_turn",
			"usage": map[string]int{"input_tokens": 1, "output_tokens": 1}})
		_, _ = w.Write(resp)
	}))
	defer srv.Close()
	t.Setenv("RA_TEST_KEY", "k")
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"llm":{"provider":"anthropic","model":"m","api_key_env":"RA_TEST_KEY","base_url":"`+srv.URL+`"},"session":{"store":"file","path":"sessions"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := call(t, "run", af, "--config", cfg, "--input", "topic=Go")
	if code != cli.ExitFailed || !strings.Contains(errOut, "--resume ") {
		t.Fatalf("first run: %d\n%s", code, errOut)
	}
	id := errOut[strings.Index(errOut, "--resume ")+9:]
	id = strings.TrimSpace(id)

	mu.Lock()
	failing = false
	asked := len(prompts)
	mu.Unlock()
	code, out, errOut := call(t, "run", af, "--config", cfg, "--resume", id)
	if code != cli.ExitOK || strings.TrimSpace(out) != "essay from facts about Go" {
		t.Fatalf("resume: %d %q\n%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range prompts[asked:] {
		if strings.Contains(p, "Goal first") {
			t.Errorf("resume asked the completed goal again: %q", p)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sessions", id+".json"))
	if err != nil || !strings.Contains(string(raw), `"status": "completed"`) {
		t.Errorf("session after resume: %s, %v", raw, err)
	}
}

// agent rpc runs a workflow per request and persists it as a session.
func TestRPCPersistsSessions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME w\nGOAL g \"hi\"\nRUN r USING g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"session":{"store":"file","path":"sessions"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "run", "params": map[string]any{"file": af}})
	var out, errOut bytes.Buffer
	if code := cli.RPC(t.Context(), agentconfig.Env{}, []string{"--config", cfg}, bytes.NewReader(append(req, '\n')), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("rpc: %d %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var resp struct {
		Result struct {
			Status    string `json:"status"`
			SessionID string `json:"session_id"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &resp); err != nil || resp.Result.Status != "completed" {
		t.Fatalf("response %q: %v", lines[len(lines)-1], err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", resp.Result.SessionID+".json")); err != nil {
		t.Errorf("session %s not persisted: %v", resp.Result.SessionID, err)
	}
}

// The policy beside the Agentfile (or --policy) governs the tools; --workspace
// says where they work; agent.json in the working directory is the default config.
func TestPolicyWorkspaceAndDefaultConfig(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	files := map[string]string{
		"Agentfile":    "NAME w\nGOAL g \"write a note\"\nRUN r USING g\n",
		"script.jsonl": `{"tool_calls":[{"name":"write","args":{"path":"note.txt","content":"hello"}}]}` + "\n" + `{"text":"done"}` + "\n",
		"agent.json":   `{"llm":{"provider":"scripted","script":"script.jsonl"},"session":{"path":"s"}}`,
		"deny.toml":    "[tools.write]\nenabled = false\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir) // agent.json is found in the working directory
	af := filepath.Join(dir, "Agentfile")

	code, out, errOut := call(t, "run", af, "--workspace", ws)
	if code != cli.ExitOK || strings.TrimSpace(out) != "done" {
		t.Fatalf("run: %d %q\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "note.txt")); err != nil || string(b) != "hello" {
		t.Errorf("the write tool did not work in --workspace: %q, %v", b, err)
	}
	_ = os.Remove(filepath.Join(ws, "note.txt"))

	code, _, errOut = call(t, "run", af, "--workspace", ws, "--policy", filepath.Join(dir, "deny.toml"))
	if code != cli.ExitOK || !strings.Contains(errOut, "tool write") || !strings.Contains(errOut, "(failed)") {
		t.Errorf("write with a policy that disables it: %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "note.txt")); err == nil {
		t.Error("a disabled tool wrote a file")
	}

	// policy.toml beside the Agentfile applies without --policy.
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(files["deny.toml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, errOut = call(t, "run", af, "--workspace", ws); !strings.Contains(errOut, "(failed)") {
		t.Errorf("policy.toml beside the Agentfile ignored:\n%s", errOut)
	}
}

// TestRunReadsTheKeyFromTheEnvironment: standalone `agent run` calls the
// provider itself with the key its environment holds (headless-agent
// R4.2.5), even beside a sandbox's variables: only `agent sandbox` goes
// through the platform's model gateway.
func TestRunReadsTheKeyFromTheEnvironment(t *testing.T) {
	t.Parallel()
	type seen struct{ path, key string }
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		got <- seen{r.URL.Path, key}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(af, []byte("NAME w\nGOAL g \"say done\"\nRUN r USING g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`{"llm":{"provider":"anthropic","base_url":"`+srv.URL+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := agentconfig.LoadEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-standalone", "PROLIFERATE_SESSION_ID": "s1",
			"PROLIFERATE_GATEWAY_URL": "http://127.0.0.1:1", "SANDBOX_MCP_AUTH_TOKEN": "rsb_tok"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code, _ := cli.Main(t.Context(), env, []string{"run", af, "--config", cfg}, &out, &errOut); code != cli.ExitOK {
		t.Fatalf("run: %d %s %s", code, out.String(), errOut.String())
	}
	if s := <-got; s.path != "/v1/messages" || s.key != "sk-ant-standalone" {
		t.Errorf("the provider got %+v, want the environment's key at /v1/messages", s)
	}
}
