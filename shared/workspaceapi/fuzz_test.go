package workspaceapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolspec"
	"github.com/remote-agents/remote-agents/shared/workspaceapi"
)

const sessionID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// store holds one working session whose type enables bash and read; the
// request a route queues reaches AppendOnce, which records it and fails as
// an outage would (503).
type store struct {
	session.Store // only the methods below are called
	sess          session.Session
	queued        *session.Event
	rec           session.IdempotencyRecord
}

func (s *store) Get(_ context.Context, id string) (session.Session, error) {
	if id != s.sess.ID {
		return session.Session{}, session.ErrNotFound
	}
	return s.sess, nil
}

func (s *store) Idempotency(context.Context, string) (session.IdempotencyRecord, error) {
	return session.IdempotencyRecord{}, session.ErrNotFound
}

func (s *store) AppendOnce(_ context.Context, _ string, _ int, events []session.Event, rec session.IdempotencyRecord) ([]session.Event, error) {
	s.queued, s.rec = &events[0], rec
	return nil, apierror.Unavailable(errors.New("fuzz: not stored"))
}

var printable = regexp.MustCompile(`^[\x21-\x7e]+$`)

// POST /api/remote_agents/{id}/workspace/tools/{tool}: any tool name,
// Idempotency-Key and body. A tool that is none, or not enabled, is refused
// before the body is read; else the body decodes as DecodeJSON decodes it,
// and what is queued is the tool, the request id asked for (or a new one),
// and the arguments compact, the same JSON value as sent ({} for none).
// What is accepted, or refused, encoded back to JSON is again.
func FuzzRun(f *testing.F) {
	f.Add("bash", "", `{"args":{"command":"ls -la"}}`)
	f.Add("read", "req-1", `{"args":{"path":"a.txt","limit":10}}`)
	f.Add("bash", "", `{}`)
	f.Add("bash", "", `{"args":null}`)
	f.Add("bash", "a b", `{"args":[1]}`)
	f.Add("git", "", `{"args":{}}`)
	f.Add("sudo", "", `not json`)
	f.Add("read", "", `{"args":{"path":"\u003cscript\u003e"}}`)
	f.Fuzz(func(t *testing.T, tool, idem, body string) {
		tok, hash := token.New(token.Session)
		st := &store{sess: session.Session{ID: sessionID, State: session.Working, TokenHashes: []string{hash},
			Blueprint: session.Blueprint{
				Workspace: &registry.WorkspaceConfig{Enabled: true, Tools: []string{toolspec.Bash, toolspec.Read}},
			},
		}}
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		h := &workspaceapi.Handlers{Sessions: session.NewWorkspaceTools(session.WorkspaceToolsOptions{Store: st, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}),
			Log: slog.New(slog.DiscardHandler)}
		req := httpapi.Request{Body: body, Headers: map[string]string{"authorization": "Bearer " + tok, "idempotency-key": idem},
			PathParameters: map[string]string{"id": sessionID, "tool": tool}}
		res, err := h.Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res, 400, 403, 404, 413, 503)
		switch {
		case !toolspec.IsWorkspaceTool(tool):
			if env.ErrorCode != apierror.ToolNotFound || st.queued != nil {
				t.Fatalf("tool %q: %+v", tool, env)
			}
			return
		case tool != toolspec.Bash && tool != toolspec.Read:
			if env.ErrorCode != apierror.ToolNotEnabled || st.queued != nil {
				t.Fatalf("tool %q: %+v", tool, env)
			}
			return
		}
		if (env.ErrorCode == apierror.ServiceUnavailable) != (st.queued != nil) || (st.queued == nil && env.ErrorCode != apierror.InvalidRequest) {
			t.Fatalf("answered %+v; queued %v", env, st.queued)
		}
		var in session.WorkspaceToolRequest
		if derr := httpapi.DecodeJSON(req, session.MaxToolBodyBytes, &in); derr != nil {
			if env.Message != httpapi.EnvelopeOf(derr).Message {
				t.Fatalf("undecodable body answered %+v, want %v", env, derr)
			}
			return
		}
		if st.queued != nil {
			var q sandboxwire.WorkspaceToolRequest
			if err := sandboxwire.Decode(st.queued.Data, &q); err != nil || st.queued.Type != sandboxwire.TypeWorkspaceToolRequest || q.Tool != tool {
				t.Fatalf("queued %+v (%v)", st.queued, err)
			}
			if (idem != "" && q.RequestID != idem) || len(q.RequestID) > sandboxwire.MaxToolRequestIDLen || !printable.MatchString(q.RequestID) {
				t.Fatalf("queued request id %q for Idempotency-Key %q", q.RequestID, idem)
			}
			if len(q.Args) > sandboxwire.MaxToolArgsBytes || !strings.HasPrefix(q.Args, "{") || !sameJSON(q.Args, in.Args) {
				t.Fatalf("queued args %s for %s", q.Args, in.Args)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(q.Args)); err != nil || compact.String() != q.Args {
				t.Fatalf("queued args %s are not compact JSON (%v)", q.Args, err)
			}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			t.Fatalf("encode %+v: %v", in, err)
		}
		if buf.Len() > session.MaxToolBodyBytes {
			return
		}
		st.queued = nil
		req.Body = buf.String()
		res, err = h.Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpapitest.Envelope(t, res, 400, 403, 404, 413, 503); got.ErrorCode != env.ErrorCode || (env.ErrorCode == apierror.InvalidRequest && got.Message != env.Message) {
			t.Fatalf("re-encoded as %s: %+v, was %+v", buf.String(), got, env)
		}
	})
}

// sameJSON reports whether queued args are the JSON value sent ({} for none).
func sameJSON(queued string, sent json.RawMessage) bool {
	if t := bytes.TrimSpace(sent); len(t) == 0 || string(t) == "null" {
		return queued == "{}"
	}
	var a, b any
	return json.Unmarshal([]byte(queued), &a) == nil && json.Unmarshal(sent, &b) == nil && reflect.DeepEqual(a, b)
}
