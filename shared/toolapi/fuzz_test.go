package toolapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/prompts"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolapi"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

const sessionID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// sessions holds one working session.
type sessions struct {
	session.Store // only Get is called
	sess          session.Session
}

func (s sessions) Get(_ context.Context, id string) (session.Session, error) {
	if id != s.sess.ID {
		return session.Session{}, session.ErrNotFound
	}
	return s.sess, nil
}

// records records the call a callback begins and fails as an outage would.
type records struct {
	toolgate.Store // only Begin is called
	begun          *toolgate.Record
}

func (r *records) Begin(_ context.Context, rec toolgate.Record, _ time.Time) (toolgate.Record, bool, error) {
	r.begun = &rec
	return toolgate.Record{}, false, apierror.Unavailable(errors.New("fuzz: not stored"))
}

// failure is the route's error body: the envelope, and success and result.
type failure struct {
	httpapi.Envelope
	Success bool   `json:"success"`
	Result  string `json:"result"`
}

// call posts body to tool as the session's sandbox and returns the answer
// and the record begun, if any.
func call(t *testing.T, tool, body string, setup bool) (failure, *toolgate.Record) {
	t.Helper()
	tok, hash := token.New(token.Sandbox)
	sess := session.Session{ID: sessionID, State: session.Working, SandboxTokenHash: hash}
	if setup {
		sess.SessionType = prompts.SessionSetup
	}
	recs := &records{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &toolapi.Handlers{Gate: toolgate.New(toolgate.Options{Sessions: sessions{sess: sess}, Records: recs, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}),
		Log: slog.New(slog.DiscardHandler)}
	res, err := h.Callback(t.Context(), httpapi.Request{Body: body, Headers: map[string]string{"authorization": "Bearer " + tok},
		PathParameters: map[string]string{"sessionId": sessionID, "toolName": tool}})
	if err != nil {
		t.Fatal(err)
	}
	var out failure
	httpapitest.Decode(t, res, &out, 400, 403, 404, 413, 503)
	if out.Success || out.Result != out.Message {
		t.Fatalf("status %d, body %s: not the route's error", res.StatusCode, res.Body)
	}
	return out, recs.begun
}

// Any caller but the session's running sandbox is 403 forbidden, in the
// tool envelope, before the body is read (agent-contract.md): no token, a
// session token or another sandbox's, a session that is not there or ended.
func TestOnlyTheRunningSandboxMayCall(t *testing.T) {
	t.Parallel()
	tok, hash := token.New(token.Sandbox)
	other, _ := token.New(token.Sandbox)
	sessionTok, _ := token.New(token.Session)
	for _, tt := range []struct {
		name, id, auth string
		state          session.State
	}{
		{"no token", sessionID, "", session.Working},
		{"not a bearer", sessionID, "Basic " + tok, session.Working},
		{"another sandbox's token", sessionID, "Bearer " + other, session.Working},
		{"a session token", sessionID, "Bearer " + sessionTok, session.Working},
		{"an unknown session", "1f8fad5b-d9cb-469f-a165-70867728950e", "Bearer " + tok, session.Working},
		{"not a session id", "..%2F..", "Bearer " + tok, session.Working},
		{"an ended session", sessionID, "Bearer " + tok, session.Ended},
	} {
		sess := session.Session{ID: sessionID, State: tt.state, SandboxTokenHash: hash}
		h := &toolapi.Handlers{Gate: toolgate.New(toolgate.Options{Sessions: sessions{sess: sess}, Records: &records{}, Log: slog.New(slog.DiscardHandler)}),
			Log: slog.New(slog.DiscardHandler)}
		headers := map[string]string{}
		if tt.auth != "" {
			headers["authorization"] = tt.auth
		}
		res, err := h.Callback(t.Context(), httpapi.Request{Body: "{not json", Headers: headers,
			PathParameters: map[string]string{"sessionId": tt.id, "toolName": "verify"}})
		var out failure
		_ = json.Unmarshal([]byte(res.Body), &out)
		if err != nil || res.StatusCode != 403 || out.ErrorCode != apierror.Forbidden || out.Success || out.Result == "" {
			t.Errorf("%s: %d %s %v, want 403 forbidden in the tool envelope", tt.name, res.StatusCode, res.Body, err)
		}
	}
}

// POST /proliferate/{sessionId}/tools/{toolName}: any tool name and body,
// in a setup session or not. A body DecodeJSON refuses is refused with its
// message; then an unknown tool is not_found, a sandbox tool,
// a bad call id or arguments are invalid_request, a setup tool outside
// setup forbidden, each before anything is stored. A call that is valid is
// begun under its record key (by completion_id for automation.complete)
// with its canonical arguments; the same call with its arguments laid out
// otherwise is begun with the same payload hash: a retry is recognised.
func FuzzCallback(f *testing.F) {
	f.Add(toolspec.Verify, `{"tool_call_id":"call-1","args":{"folder":"evidence"}}`, false)
	f.Add(toolspec.Verify, `{"tool_call_id":"call-1"}`, false)
	f.Add(toolspec.SaveSnapshot, `{"tool_call_id":"c","args":{"message":"x"}}`, true)
	f.Add(toolspec.AutomationCompleteAlias, `{"tool_call_id":"c","args":{"run_id":"r","completion_id":"done-1","outcome":"succeeded"}}`, false)
	f.Add(toolspec.SaveServiceCommands, `{"tool_call_id":"c","args":{"commands":[{"name":"web","command":"npm start"}]}}`, false)
	f.Add(toolspec.SaveEnvFiles, `{"tool_call_id":"c","args":{"files":[{"path":".env","format":"dotenv","mode":"secret","keys":[{"key":"A","required":true}]}]}}`, true)
	f.Add(toolspec.RequestEnvVariables, `{"tool_call_id":"c","args":{"keys":[{"key":"A"}]}}`, false)
	f.Add("bash", `{"tool_call_id":"c"}`, false)
	f.Add(toolspec.Verify, `{"tool_call_id":"a b","args":[]}`, false)
	f.Fuzz(func(t *testing.T, tool, body string, setup bool) {
		out, begun := call(t, tool, body, setup)
		def, known := toolspec.Lookup(tool)
		var in struct {
			ToolCallID string          `json:"tool_call_id"`
			Args       json.RawMessage `json:"args"`
		}
		if derr := httpapi.DecodeJSON(httpapi.Request{Body: body}, toolspec.MaxArgsBytes+1024, &in); derr != nil {
			// The body is read (after the caller is known) before the tool is looked up.
			if out.ErrorCode != apierror.InvalidRequest || out.Message != httpapi.EnvelopeOf(derr).Message || begun != nil {
				t.Fatalf("undecodable body answered %+v, want %v", out, derr)
			}
			return
		}
		switch {
		case !known:
			if out.ErrorCode != apierror.NotFound || begun != nil {
				t.Fatalf("unknown tool %q: %+v", tool, out)
			}
			return
		case def.Domain != toolspec.Gateway:
			if out.ErrorCode != apierror.InvalidRequest || begun != nil {
				t.Fatalf("sandbox tool %q: %+v", tool, out)
			}
			return
		}
		if (out.ErrorCode == apierror.ServiceUnavailable) != (begun != nil) {
			t.Fatalf("answered %+v; begun %+v", out, begun)
		}
		if begun == nil {
			if out.ErrorCode == apierror.Forbidden && (!def.SetupOnly || setup) {
				t.Fatalf("forbidden %q (setup %v): %+v", tool, setup, out)
			}
			return
		}
		args, err := toolspec.Parse(def.Name, in.Args)
		if err != nil || !toolspec.ValidCallID(in.ToolCallID) || (def.SetupOnly && !setup) {
			t.Fatalf("begun %+v for %s (%v)", begun, body, err)
		}
		key := in.ToolCallID
		if c, ok := args.(toolspec.CompleteArgs); ok {
			key = c.CompletionID
		}
		canon, _ := json.Marshal(args)
		if begun.Tool != def.Name || begun.CallID != key || begun.Key != toolgate.RecordKey(sessionID, def.Name, key) ||
			begun.SessionID != sessionID || !bytes.Equal(begun.Args, canon) || begun.PayloadHash == "" {
			t.Fatalf("begun %+v for %s", begun, body)
		}
		// The same call laid out otherwise.
		var indented bytes.Buffer
		if len(bytes.TrimSpace(in.Args)) == 0 || json.Indent(&indented, in.Args, " ", "\t") != nil {
			return
		}
		id, _ := json.Marshal(in.ToolCallID)
		relaid := "{\n \"args\": " + indented.String() + ",\n \"tool_call_id\": " + string(id) + "\n}"
		if len(relaid) > toolspec.MaxArgsBytes {
			return
		}
		_, again := call(t, tool, relaid, setup)
		if again == nil || again.PayloadHash != begun.PayloadHash || again.Key != begun.Key {
			t.Fatalf("the same call laid out as %s was begun as %+v, first %+v", relaid, again, begun)
		}
	})
}
