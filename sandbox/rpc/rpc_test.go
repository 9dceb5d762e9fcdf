package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/rpc"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
)

func serve(t *testing.T, input string, run rpc.Runner) []map[string]any {
	t.Helper()
	var out strings.Builder
	if err := rpc.Serve(t.Context(), strings.NewReader(input), &out, run); err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if m["jsonrpc"] != "2.0" {
			t.Errorf("line without jsonrpc 2.0: %v", m)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func scripted(ctx context.Context, wf *agentfile.Workflow, inputs map[string]string, onEvent func(workflow.Event)) (workflow.Result, string, error) {
	steps, _ := llm.ParseScript([]byte(`{"text":"first"}` + "\n" + `{"text":"second"}`))
	res, err := workflow.Run(ctx, wf, inputs, workflow.Options{Provider: llm.NewScripted(steps), OnEvent: onEvent})
	return res, "0123456789abcdef0123456789abcdef", err
}

func TestRunStreamsEventsThenResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME w\nINPUT topic\nGOAL a \"about $topic\"\nGOAL b \"more\"\nRUN r USING a, b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"file": af, "inputs": map[string]string{"topic": "Go"}})
	msgs := serve(t, `{"jsonrpc":"2.0","id":7,"method":"run","params":`+string(params)+"}\n", scripted)
	var methods []string
	for _, m := range msgs[:len(msgs)-1] {
		methods = append(methods, m["method"].(string))
	}
	if strings.Join(methods, ",") != "goal_started,goal_complete,goal_started,goal_complete" {
		t.Errorf("notifications %v", methods)
	}
	last := msgs[len(msgs)-1]
	result, _ := last["result"].(map[string]any)
	if last["id"] != float64(7) || result["status"] != "completed" || result["output"] != "second" || len(result["session_id"].(string)) != 32 {
		t.Errorf("response %v", last)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	failing := func(context.Context, *agentfile.Workflow, map[string]string, func(workflow.Event)) (workflow.Result, string, error) {
		return workflow.Result{}, "s-failed", errors.New("model unreachable")
	}
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME w\nGOAL a \"x\"\nRUN r USING a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string
		code float64
		id   any
	}{
		{`{not json`, rpc.ParseError, nil},
		{`{"jsonrpc":"1.0","id":1,"method":"run"}`, rpc.InvalidRequest, float64(1)},
		{`{"jsonrpc":"2.0","id":2,"method":"fly"}`, rpc.MethodNotFound, float64(2)},
		{`{"jsonrpc":"2.0","id":3,"method":"run","params":{"path":"x"}}`, rpc.InvalidParams, float64(3)},
		{`{"jsonrpc":"2.0","id":"s","method":"run","params":{"file":"/nope/Agentfile"}}`, rpc.InvalidParams, "s"},
		{`{"jsonrpc":"2.0","id":4,"method":"run","params":{"file":"` + af + `"}}`, rpc.RunFailed, float64(4)},
	}
	for _, tt := range tests {
		msgs := serve(t, tt.line+"\n", failing)
		last := msgs[len(msgs)-1]
		e, _ := last["error"].(map[string]any)
		if e == nil || e["code"] != tt.code || last["id"] != tt.id {
			t.Errorf("%s: %v", tt.line, last)
		}
	}
	// A notification (no id) gets no response.
	if msgs := serve(t, `{"jsonrpc":"2.0","method":"fly"}`+"\n", failing); len(msgs) != 0 {
		t.Errorf("notification answered: %v", msgs)
	}
}
