package sandboxapi_test

// Fuzz targets of the sandbox channel's request decoding. Each feeds any
// body to the real handler as the session's own sandbox, over a store and
// an object store that record what reaches them and then fail as an outage
// would: a body the channel refuses is answered 400 and reaches nothing; one
// it accepts reaches the store (503), and what reached it is checked
// against the channel's rules.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/sandboxapi"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

const (
	sessionID  = "0f8fad5b-d9cb-469f-a165-70867728950e"
	guardrails = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func down() error { return apierror.Unavailable(errors.New("fuzz: not stored")) }

// store holds one session and records what reaches it.
type store struct {
	session.Store // only the methods below are called
	sess          session.Session
	reached       bool
	change        *session.Change
	touched       *session.Fields
	appended      []session.Event
	appendID      string
	presigned     []string
}

func (s *store) Get(_ context.Context, id string) (session.Session, error) {
	if id != s.sess.ID {
		return session.Session{}, session.ErrNotFound
	}
	return s.sess, nil
}

func (s *store) Transition(_ context.Context, _ string, c session.Change) (session.Session, error) {
	s.reached, s.change = true, &c
	return session.Session{}, down()
}

func (s *store) Touch(_ context.Context, _ string, _ int, f session.Fields) (session.Session, error) {
	s.reached, s.touched = true, &f
	return session.Session{}, down()
}

func (s *store) AppendEvents(_ context.Context, _ string, _ int, evs []session.Event) ([]session.Event, error) {
	s.reached, s.appended = true, evs
	return nil, down()
}

func (s *store) Idempotency(_ context.Context, key string) (session.IdempotencyRecord, error) {
	if strings.Contains(key, "event") {
		return session.IdempotencyRecord{}, session.ErrNotFound // an append's id: not seen yet
	}
	s.reached = true
	return session.IdempotencyRecord{}, down()
}

func (s *store) AppendOnce(_ context.Context, _ string, _ int, events []session.Event, rec session.IdempotencyRecord) ([]session.Event, error) {
	s.reached, s.appended, s.appendID = true, events, rec.Key
	return nil, down()
}

// blobs records the presigned uploads.
type blobs struct {
	blob.Store // only PresignPut is called
	s          *store
}

func (b blobs) PresignPut(_ context.Context, key, _ string, _ int64, _ time.Duration) (blob.Presigned, error) {
	b.s.reached, b.s.presigned = true, append(b.s.presigned, key)
	return blob.Presigned{}, down()
}

type reporter struct{}

func (reporter) Report(context.Context, report.Exception) {}

// post sends body to the handler of route as the session's sandbox (in
// state) and returns the answer's envelope and the store.
func post(t *testing.T, route string, state session.State, body string) (httpapi.Envelope, *store, httpapi.Request) {
	t.Helper()
	tok, hash := token.New(token.Sandbox)
	st := &store{sess: session.Session{ID: sessionID, State: state, SandboxTokenHash: hash, ServedGuardrailsHash: guardrails, Generation: 1}}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ch := sandboxchannel.New(sandboxchannel.Options{Store: st, Blob: blobs{s: st}, Reporter: reporter{}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	h := &sandboxapi.Handlers{Channel: ch, Log: slog.New(slog.DiscardHandler)}
	var handler httpapi.Handler
	for _, r := range h.Routes() {
		if r.Pattern == sandboxwire.Prefix+"{sessionId}/"+route && r.Method == "POST" {
			handler = r.Handler
		}
	}
	req := httpapi.Request{Body: body, Headers: map[string]string{"authorization": "Bearer " + tok}, PathParameters: map[string]string{"sessionId": sessionID}}
	res, err := handler(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == 200 {
		return httpapi.Envelope{Status: 200}, st, req
	}
	env := httpapitest.Envelope(t, res)
	if (env.ErrorCode == apierror.ServiceUnavailable) != st.reached || (!st.reached && env.ErrorCode != apierror.InvalidRequest) {
		t.Fatalf("answered %+v; reached the store: %v", env, st.reached)
	}
	return env, st, req
}

// decoded decodes req's body as the route does; a body it refuses must
// have been answered with its message.
func decoded(t *testing.T, req httpapi.Request, limit int, v any, env httpapi.Envelope) bool {
	t.Helper()
	if err := httpapi.DecodeJSON(req, limit, v); err != nil {
		if env.ErrorCode != apierror.CodeOf(err) || env.Message != httpapi.EnvelopeOf(err).Message {
			t.Fatalf("undecodable body answered %+v, want %v", env, err)
		}
		return false
	}
	return true
}

// sameAgain checks that v, encoded back to JSON, gets the same answer.
func sameAgain(t *testing.T, route string, state session.State, v any, limit int, env httpapi.Envelope) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	if buf.Len() > limit {
		return
	}
	got, _, _ := post(t, route, state, buf.String())
	if got.ErrorCode != env.ErrorCode || (env.ErrorCode == apierror.InvalidRequest && got.Message != env.Message) {
		t.Fatalf("re-encoded as %s: %+v, was %+v", buf.String(), got, env)
	}
}

var states = []session.State{session.Provisioning, session.Ready, session.Working, session.Idle, session.Ending}

// POST /sandbox/{sessionId}/status, from a session in any live state: a
// report reaches the store only as a transition to a state a sandbox may
// report, ready with the guardrails it was served and a bounded workspace
// status, ended or failed with a reason a sandbox may give.
func FuzzStatus(f *testing.F) {
	f.Add(uint8(0), `{"state":"ready","guardrails_hash":"`+guardrails+`","workspace":{"status":"degraded","warnings":["clone failed"]}}`)
	f.Add(uint8(2), `{"state":"idle"}`)
	f.Add(uint8(2), `{"state":"ended","reason":"idle"}`)
	f.Add(uint8(0), `{"state":"failed"}`)
	f.Add(uint8(4), `{"state":"ended","reason":"killed"}`)
	f.Add(uint8(1), `{"state":"ended","reason":"bored"}`)
	f.Add(uint8(0), `{"state":"ready","guardrails_hash":"x"}`)
	f.Add(uint8(2), `{"state":"provisioning","job":{}}`)
	f.Fuzz(func(t *testing.T, st uint8, body string) {
		state := states[int(st)%len(states)]
		env, s, req := post(t, sandboxwire.RouteStatus, state, body)
		var in sandboxwire.StatusReport
		if !decoded(t, req, sandboxwire.MaxStatusBytes, &in, env) {
			return
		}
		if c := s.change; c != nil {
			if c.To != in.State || c.Generation != 1 {
				t.Fatalf("change %+v for %+v", c, in)
			}
			switch c.To {
			case session.Ready:
				if in.GuardrailsHash != guardrails || !slices.Equal(c.From, session.Starting) {
					t.Fatalf("ready %+v for %+v", c, in)
				}
				if w := in.Workspace; w != nil && (len(w.Warnings) > sandboxwire.MaxWorkspaceWarnings ||
					!slices.Contains([]string{sandboxwire.WorkspaceReady, sandboxwire.WorkspaceDegraded, sandboxwire.WorkspaceNone}, w.Status)) {
					t.Fatalf("accepted workspace %+v", w)
				}
			case session.Working, session.Idle:
			case session.Ended, session.Failed:
				if state != session.Ending && !slices.Contains(sandboxwire.Reportable, c.Reason) {
					t.Fatalf("ended for reason %q", c.Reason)
				}
			default:
				t.Fatalf("accepted a move to %q", c.To)
			}
		}
		sameAgain(t, sandboxwire.RouteStatus, state, in, sandboxwire.MaxStatusBytes, env)
	})
}

// POST /sandbox/{sessionId}/heartbeat: no body, or a usage sample that
// is finite and not negative.
func FuzzHeartbeat(f *testing.F) {
	f.Add(``)
	f.Add(`{"usage":{"cpu_percent":12.5,"memory_mb":300},"busy":true}`)
	f.Add(`{"usage":{"cpu_percent":-1,"memory_mb":0}}`)
	f.Add(`{"usage":{"cpu_percent":1e400}}`)
	f.Add(`{"busy":"yes"}`)
	f.Fuzz(func(t *testing.T, body string) {
		env, s, req := post(t, sandboxwire.RouteHeartbeat, session.Working, body)
		if body == "" {
			if s.touched == nil || s.touched.Resources != nil {
				t.Fatalf("empty heartbeat: %+v, touched %+v", env, s.touched)
			}
			return
		}
		var in sandboxwire.HeartbeatReport
		if !decoded(t, req, sandboxwire.MaxHeartbeatBytes, &in, env) {
			return
		}
		if s.touched != nil {
			u := s.touched.Resources
			if !reflect.DeepEqual(u, in.Usage) || (u != nil && (u.CPUPercent < 0 || u.MemoryMB < 0 || math.IsInf(u.CPUPercent, 0) || math.IsNaN(u.MemoryMB))) ||
				(in.Busy != !s.touched.LastActivityAt.IsZero()) {
				t.Fatalf("touched %+v for %+v", s.touched, in)
			}
		}
		sameAgain(t, sandboxwire.RouteHeartbeat, session.Working, in, sandboxwire.MaxHeartbeatBytes, env)
	})
}

// POST /sandbox/{sessionId}/events: what is appended is 1 to
// MaxEventsPerAppend events of types a sandbox may send, their data of
// keys of 1 to 255 bytes, nested at most 16 deep, numbers as float64, data
// that goes through JSON unchanged (as the store keeps it); with an id, one
// event, once.
func FuzzEvents(f *testing.F) {
	f.Add(`{"events":[{"type":"agent.message","data":{"text":"hi"}},{"type":"tool.call","data":{"name":"bash","n":1.5e3,"a":[1,{"b":null}]}}]}`)
	f.Add(`{"id":"append-1","events":[{"type":"agent.message","data":{"text":"once"}}]}`)
	f.Add(`{"events":[{"type":"user.message","data":{"text":"forged"}}]}`)
	f.Add(`{"events":[{"type":"agent.message","data":{"n":1e126,"":1}}]}`)
	f.Add(`{"events":[{"type":"agent.message","data":{"n":123456789012345678901234567890123456789}}]}`)
	f.Add(`{"events":[{"type":"agent.message","data":[1]}]}`)
	f.Add(`{"events":[{"type":"agent.message"}]}`)
	f.Add(`{"events":[]}`)
	f.Fuzz(func(t *testing.T, body string) {
		env, s, req := post(t, sandboxwire.RouteEvents, session.Working, body)
		limit := sandboxwire.MaxEventsPerAppend * sandboxwire.MaxEventBytes
		var in sandboxwire.EventsRequest
		if !decoded(t, req, limit, &in, env) {
			return
		}
		if s.appended != nil {
			if len(s.appended) != len(in.Events) || len(in.Events) < 1 || len(in.Events) > sandboxwire.MaxEventsPerAppend || (in.ID != "" && len(in.Events) != 1) {
				t.Fatalf("appended %d events for %d (id %q)", len(s.appended), len(in.Events), in.ID)
			}
			for i, e := range s.appended {
				if e.Type != in.Events[i].Type || !sandboxwire.SandboxMaySend(e.Type) || len(in.Events[i].Data) > sandboxwire.MaxEventBytes {
					t.Fatalf("appended %+v", e)
				}
				if e.Data != nil {
					checkData(t, e.Data, 1)
					raw, err := json.Marshal(e.Data)
					if err != nil {
						t.Fatalf("data %+v does not encode: %v", e.Data, err)
					}
					var back map[string]any
					if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, e.Data) {
						t.Fatalf("data %+v reads back as %+v (%v)", e.Data, back, err)
					}
				}
			}
		}
		sameAgain(t, sandboxwire.RouteEvents, session.Working, in, limit, env)
	})
}

func checkData(t *testing.T, v any, depth int) {
	t.Helper()
	if depth > 16 {
		t.Fatalf("data nested %d deep", depth)
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "" || len(k) > 255 {
				t.Fatalf("data key %q", k)
			}
			checkData(t, e, depth+1)
		}
	case []any:
		for _, e := range v {
			checkData(t, e, depth+1)
		}
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("number %v", v)
		}
	case string, bool, nil:
	default:
		t.Fatalf("data of type %T", v)
	}
}

// POST /sandbox/{sessionId}/uploads: verify's and save_snapshot's files
// only, each under the call's prefix by a clean relative path, listed once.
func FuzzUploads(f *testing.F) {
	f.Add(`{"tool":"verify","tool_call_id":"call-1","files":[{"path":"shots/a.png","size_bytes":10,"content_type":"image/png"},{"path":"log.txt","size_bytes":0}]}`)
	f.Add(`{"tool":"save_snapshot","tool_call_id":"c","files":[{"path":"snapshot.tar.gz","size_bytes":5368709120}]}`)
	f.Add(`{"tool":"verify","tool_call_id":"c","files":[{"path":"../x","size_bytes":1},{"path":"a//b","size_bytes":1}]}`)
	f.Add(`{"tool":"verify","tool_call_id":"c","files":[{"path":"a","size_bytes":1},{"path":"a","size_bytes":1}]}`)
	f.Add(`{"tool":"job_uploads","tool_call_id":"c","files":[{"path":"output/a","size_bytes":1}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		env, s, req := post(t, sandboxwire.RouteUploads, session.Working, body)
		var in sandboxwire.UploadsRequest
		if !decoded(t, req, sandboxwire.MaxUploadsRequestBytes, &in, env) {
			return
		}
		if s.presigned != nil {
			if (in.Tool != toolspec.Verify && in.Tool != toolspec.SaveSnapshot) || !toolspec.ValidCallID(in.ToolCallID) || len(in.Files) < 1 || len(in.Files) > sandboxwire.MaxUploadFiles {
				t.Fatalf("presigned for %+v", in)
			}
			seen := map[string]bool{}
			for _, file := range in.Files {
				if !sandboxwire.ValidUploadPath(file.Path) || seen[file.Path] || file.SizeBytes < 0 {
					t.Fatalf("accepted file %+v of %+v", file, in)
				}
				seen[file.Path] = true
			}
			if want := toolspec.UploadPrefix(sessionID, in.Tool, in.ToolCallID) + in.Files[0].Path; s.presigned[0] != want {
				t.Fatalf("presigned %q, want %q", s.presigned[0], want)
			}
		}
		sameAgain(t, sandboxwire.RouteUploads, session.Working, in, sandboxwire.MaxUploadsRequestBytes, env)
	})
}

// POST /sandbox/{sessionId}/tool-results: a result reaches the store (to
// find its request) only if CheckToolResult passes it.
func FuzzToolResults(f *testing.F) {
	f.Add(`{"request_id":"r-1","tool":"bash","output":"ok","is_error":false,"args":"{\"command\":\"ls\"}"}`)
	f.Add(`{"request_id":"","tool":"bash","output":"x"}`)
	f.Add(`{"request_id":"r","tool":"bash","output":"\xff"}`)
	f.Fuzz(func(t *testing.T, body string) {
		env, s, req := post(t, sandboxwire.RouteToolResults, session.Working, body)
		var in sandboxwire.ToolResult
		if !decoded(t, req, sandboxwire.MaxToolResultBytes, &in, env) {
			return
		}
		if s.reached && sandboxwire.CheckToolResult(in) != nil {
			t.Fatalf("accepted %+v: %v", in, sandboxwire.CheckToolResult(in))
		}
		sameAgain(t, sandboxwire.RouteToolResults, session.Working, in, sandboxwire.MaxToolResultBytes, env)
	})
}
