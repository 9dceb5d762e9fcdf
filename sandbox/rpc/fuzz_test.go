package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/rpc"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
)

// Serve, for any input: every line it writes is one JSON-RPC 2.0 message;
// each request line gets exactly one response, in order, with the request's
// id (null for a line that is not JSON), and a notification none; every
// error is one of the protocol's codes. Requests name files only in the
// test's folder (which holds the Agentfile A).
func FuzzServe(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"run","params":{"file":"A","inputs":{"topic":"Go"}}}` + "\n")
	f.Add(`{"jsonrpc":"2.0","id":"x","method":"run","params":{"file":"A","inputs":{"topic":"fail"}}}` + "\r\n" + `{"jsonrpc":"2.0","method":"run","params":{"file":"A"}}`)
	f.Add("not json\n\n  \n" + `{"jsonrpc":"1.0","id":[1],"method":"run"}` + "\n" + `{"jsonrpc":"2.0","id":null,"method":"stop"}`)
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"run","params":{"file":"A","extra":1}}` + "\n" + `{"jsonrpc":"2.0","id":3,"method":"run","params":{"file":"missing"}}`)
	f.Add(`{"jsonrpc":"2.0","id":{"a":"<b>"},"method":"run","params":{"file":"A","inputs":{"nope":"1"}}}`)
	f.Fuzz(func(t *testing.T, input string) {
		if len(input) > 64*1024 {
			return
		}
		var want []json.RawMessage // the ids of the responses, in order
		for _, line := range strings.Split(input, "\n") {
			line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
			if line == "" {
				continue
			}
			var req rpc.Request
			if err := json.Unmarshal([]byte(line), &req); err != nil {
				want = append(want, json.RawMessage("null"))
				continue
			}
			if req.JSONRPC == "2.0" && req.Method == "run" {
				var p rpc.RunParams
				dec := json.NewDecoder(bytes.NewReader(req.Params))
				dec.DisallowUnknownFields()
				if dec.Decode(&p) == nil && strings.ContainsAny(p.File, `/\`) {
					return // outside the test's folder
				}
			}
			switch {
			case req.JSONRPC != "2.0" || req.Method == "":
				want = append(want, cmpOr(req.ID))
			case len(req.ID) > 0:
				want = append(want, req.ID)
			}
		}
		dir := t.TempDir()
		if err := os.WriteFile(dir+"/A", []byte("NAME w\nINPUT topic DEFAULT \"x\"\nGOAL g \"about $topic\"\nRUN r USING g\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		var out bytes.Buffer
		if err := rpc.Serve(t.Context(), strings.NewReader(input), &out, fakeRun); err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Result  json.RawMessage `json:"result"`
				Error   *rpc.Error      `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("output line %q (%v)", sc.Text(), err)
			}
			if m.Method != "" {
				if m.ID != nil || m.Result != nil || m.Error != nil {
					t.Fatalf("notification %q", sc.Text())
				}
				continue
			}
			if m.ID == nil || (m.Result == nil) == (m.Error == nil) {
				t.Fatalf("response %q", sc.Text())
			}
			if m.Error != nil && !slices.Contains([]int{rpc.ParseError, rpc.InvalidRequest, rpc.MethodNotFound, rpc.InvalidParams, rpc.RunFailed}, m.Error.Code) {
				t.Fatalf("error code %d in %q", m.Error.Code, sc.Text())
			}
			got = append(got, m.ID)
		}
		if len(got) != len(want) {
			t.Fatalf("%d responses to %q, want %d:\n%s", len(got), input, len(want), out.String())
		}
		for i := range got {
			var a, b any
			if json.Unmarshal(got[i], &a) != nil || json.Unmarshal(want[i], &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("response %d has id %s, want %s", i, got[i], want[i])
			}
		}
	})
}

func cmpOr(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// fakeRun runs nothing: it tells of one goal and fails when asked to.
func fakeRun(_ context.Context, wf *agentfile.Workflow, inputs map[string]string, onEvent func(workflow.Event)) (workflow.Result, string, error) {
	onEvent(workflow.Event{Type: workflow.GoalStarted, Goal: wf.Goals[0].Name})
	onEvent(workflow.Event{Type: "not.notified"})
	if inputs["topic"] == "fail" {
		return workflow.Result{}, "s-1", errors.New("failed\nas asked")
	}
	return workflow.Result{Output: inputs["topic"]}, "s-1", nil
}
