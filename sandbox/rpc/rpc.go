// Package rpc serves the agent over JSON-RPC 2.0 on stdio: one request per line on
// stdin, one response per line on stdout, and the run's events as notifications
// (goal_started, goal_complete, tool_call, loop_iteration, error) in between.
//
//	→ {"jsonrpc":"2.0","id":1,"method":"run","params":{"file":"Agentfile","inputs":{"topic":"Go"}}}
//	← {"jsonrpc":"2.0","method":"goal_started","params":{"goal":"research",…}}
//	← {"jsonrpc":"2.0","id":1,"result":{"status":"completed","session_id":"…","output":"…"}}
package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
)

// JSON-RPC 2.0 error codes.
const (
	ParseError     = -32700
	InvalidRequest = -32600
	MethodNotFound = -32601
	InvalidParams  = -32602
	InternalError  = -32603
	// RunFailed is the server-defined code of a run that failed.
	RunFailed = -32000
)

// MaxLineBytes bounds one request.
const MaxLineBytes = 1 << 20

// Request is a JSON-RPC request or notification (no id).
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// RunParams are the params of "run".
type RunParams struct {
	File   string            `json:"file"`
	Inputs map[string]string `json:"inputs,omitempty"`
}

// RunResult is the result of "run".
type RunResult struct {
	Status    string            `json:"status"`
	SessionID string            `json:"session_id"`
	Output    string            `json:"output"`
	Outputs   map[string]string `json:"outputs,omitempty"`
}

// Runner runs a loaded workflow in a new session and returns the session's id;
// the CLI supplies one built from its configuration.
type Runner func(ctx context.Context, wf *agentfile.Workflow, inputs map[string]string, onEvent func(workflow.Event)) (workflow.Result, string, error)

// notified are the events sent as notifications.
var notified = map[string]bool{
	workflow.GoalStarted:   true,
	workflow.GoalComplete:  true,
	workflow.ToolCallEvent: true,
	workflow.LoopIteration: true,
	workflow.ErrorEvent:    true,
}

// Serve reads requests from in until EOF and writes to out.
func Serve(ctx context.Context, in io.Reader, out io.Writer, run Runner) error {
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	write := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(v)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			write(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &Error{Code: ParseError, Message: "parse error: " + err.Error()}})
			continue
		}
		if req.JSONRPC != "2.0" || req.Method == "" {
			write(response{JSONRPC: "2.0", ID: idOrNull(req.ID), Error: &Error{Code: InvalidRequest, Message: `invalid request: want "jsonrpc":"2.0" and a method`}})
			continue
		}
		result, rpcErr := handle(ctx, req, run, func(e workflow.Event) {
			if notified[e.Type] {
				write(notification{JSONRPC: "2.0", Method: e.Type, Params: e})
			}
		})
		if len(req.ID) == 0 {
			continue // a notification gets no response
		}
		write(response{JSONRPC: "2.0", ID: req.ID, Result: result, Error: rpcErr})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("rpc: read: %w", err)
	}
	return nil
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

func handle(ctx context.Context, req Request, run Runner, onEvent func(workflow.Event)) (any, *Error) {
	switch req.Method {
	case "run":
		var p RunParams
		dec := json.NewDecoder(bytes.NewReader(req.Params))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil || p.File == "" {
			return nil, &Error{Code: InvalidParams, Message: `invalid params: want {"file": "<Agentfile>", "inputs": {…}}`}
		}
		wf, err := agentfile.Load(p.File)
		if err != nil {
			return nil, &Error{Code: InvalidParams, Message: err.Error()}
		}
		inputs, err := workflow.BindInputs(wf, p.Inputs)
		if err != nil {
			return nil, &Error{Code: InvalidParams, Message: err.Error()}
		}
		res, session, err := run(ctx, wf, inputs, onEvent)
		if err != nil {
			data := map[string]string{"session_id": session, "status": "failed"}
			if errors.Is(err, context.Canceled) {
				return nil, &Error{Code: RunFailed, Message: "run cancelled", Data: data}
			}
			return nil, &Error{Code: RunFailed, Message: err.Error(), Data: data}
		}
		return RunResult{Status: "completed", SessionID: session, Output: res.Output, Outputs: res.Outputs}, nil
	default:
		return nil, &Error{Code: MethodNotFound, Message: fmt.Sprintf("method %q not found (methods: run)", req.Method)}
	}
}
