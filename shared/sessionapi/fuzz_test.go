package sessionapi_test

// Fuzz targets of the app-facing session routes' request decoding: each
// feeds any body (and path or query) to the real handler over a service whose
// dependencies are fakes that record what reaches them and then fail as an
// outage would. So a request the route finds invalid is answered 400
// invalid_request and reaches nothing; one it accepts reaches the store (or
// the object store, or the guardrails) and is answered 503. Each target
// checks that split against an independent decode, the error envelope, what
// reached the fakes, and that a value accepted (or refused) is accepted (or
// refused) again once encoded back to JSON.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/token"
)

const sessionID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// down is how the fakes fail once reached: an outage, 503.
func down() error { return apierror.Unavailable(errors.New("fuzz: not reached in this test")) }

// fakes are the service's dependencies, recording what reaches them.
type fakes struct {
	session.Store // only the methods below are called
	sess          session.Session
	tok           string

	reached    bool
	appended   []session.Event
	put        []byte
	presigned  string
	presignCT  string
	presignLen int64
	guardrails bool
}

func (f *fakes) Get(_ context.Context, id string) (session.Session, error) {
	if id != f.sess.ID {
		return session.Session{}, session.ErrNotFound
	}
	return f.sess, nil
}

func (f *fakes) Idempotency(context.Context, string) (session.IdempotencyRecord, error) {
	f.reached = true
	return session.IdempotencyRecord{}, down()
}

func (f *fakes) AppendEvents(_ context.Context, _ string, _ int, evs []session.Event) ([]session.Event, error) {
	f.reached, f.appended = true, evs
	return nil, down()
}

// blobs is the object store of fakes.
type blobs struct {
	blob.Store // only the methods below are called
	f          *fakes
}

func (b blobs) Put(_ context.Context, _ string, r io.Reader, _ int64, _ string) error {
	b.f.reached = true
	b.f.put, _ = io.ReadAll(r)
	return down()
}

func (b blobs) PresignPut(_ context.Context, key, ct string, size int64, _ time.Duration) (blob.Presigned, error) {
	b.f.reached, b.f.presigned, b.f.presignCT, b.f.presignLen = true, key, ct, size
	return blob.Presigned{}, down()
}

// registry knows every app key.
type registryFake struct{ registry.Store }

func (registryFake) AppKeyByHash(context.Context, string) (registry.AppKey, error) {
	return registry.AppKey{ID: "key", Tenant: "tenant"}, nil
}

// guardrails are missing; opening them is how a create that passed
// validation shows.
type guardrailsFake struct{ f *fakes }

func (g guardrailsFake) Open(context.Context) (io.ReadCloser, error) {
	g.f.guardrails, g.f.reached = true, true
	return nil, errors.New("fuzz: no guardrails")
}
func (guardrailsFake) String() string { return "fuzz" }

type reporter struct{}

func (reporter) Report(context.Context, report.Exception) {}

// newHandlers returns the handlers over fakes holding one working session.
func newHandlers() (*sessionapi.Handlers, *fakes) {
	tok, hash := token.New(token.Session)
	f := &fakes{tok: tok, sess: session.Session{ID: sessionID, State: session.Working, Tenant: "tenant", TokenHashes: []string{hash}, Blueprint: session.Blueprint{ConfigurationID: "cfg"}}}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log, clock := slog.New(slog.DiscardHandler), func() time.Time { return now }
	return &sessionapi.Handlers{
		Creator: session.NewCreator(session.CreatorOptions{Store: f, Registry: registryFake{}, Guardrails: guardrailsFake{f}, Reporter: reporter{}, Log: log, Now: clock}),
		Control: session.NewControl(session.ControlOptions{Store: f, Guardrails: guardrailsFake{f}, Log: log, Now: clock}),
		Inbox:   session.NewInbox(session.InboxOptions{Store: f, Blob: blobs{f: f}, Log: log, Now: clock}),
		Log:     log,
	}, f
}

// request is a call with a bearer token and body.
func request(tok, body string, b64 bool) httpapi.Request {
	return httpapi.Request{Headers: map[string]string{"authorization": "Bearer " + tok}, Body: body, IsBase64Encoded: b64,
		PathParameters: map[string]string{"id": sessionID}}
}

// sameDecode checks that a body DecodeJSON refuses is refused with
// DecodeJSON's message, and returns whether it decoded.
func sameDecode(t *testing.T, req httpapi.Request, limit int, v any, env httpapi.Envelope) bool {
	t.Helper()
	err := httpapi.DecodeJSON(req, limit, v)
	if err == nil {
		return true
	}
	if env.ErrorCode != apierror.InvalidRequest || env.Message != httpapi.EnvelopeOf(err).Message {
		t.Fatalf("undecodable body answered %+v, want %v", env, err)
	}
	return false
}

// reencode returns v as a JSON body, and false if it is over limit.
func reencode(t *testing.T, v any, limit int) (string, bool) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	return buf.String(), buf.Len() <= limit
}

// again checks that body, sent again, gets the same answer as env.
func again(t *testing.T, h httpapi.Handler, req httpapi.Request, body string, env httpapi.Envelope) {
	t.Helper()
	req.Body, req.IsBase64Encoded = body, false
	res, err := h(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := httpapitest.Envelope(t, res, 400, 413, 503); got.ErrorCode != env.ErrorCode || (env.ErrorCode == apierror.InvalidRequest && got.Message != env.Message) {
		t.Fatalf("re-encoded as %s: %+v, was %+v", body, got, env)
	}
}

var (
	slug      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	printable = regexp.MustCompile(`^[\x21-\x7e]+$`)
	envKey    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,199}$`)
)

// POST /api/remote_agents/create.
func FuzzCreate(f *testing.F) {
	f.Add(`{"project_name":"p","persona_slug":"dev","initial_prompt":"hi"}`, false, "")
	f.Add(`{"project_name":"p","persona_slug":"dev","initial_prompt":"hi","session_type":"setup","configuration_id":"c","client_type":"automation",`+
		`"system_prompt":"s","agent_type":"t","feature_flags":{},"task_context":{"repository_url":"https://github.com/o/r","branch":"main","pull_request_number":3,"base_branch":"dev"}}`, false, "key-1")
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"project_name":"p","persona_slug":"dev","initial_prompt":"hi"}`)), true, "")
	f.Add(`{"project_name":"p","persona_slug":"Dev","initial_prompt":" "}`, false, "a b")
	f.Add(`{"project_name":"p","persona_slug":"d","initial_prompt":"x","task_context":{"repository_url":"file:///etc","branch":"--upload-pack=x"}}`, false, "")
	f.Add(`null`, false, "")
	f.Fuzz(func(t *testing.T, body string, b64 bool, idem string) {
		h, fk := newHandlers()
		req := request("rak_key", body, b64)
		req.Headers["idempotency-key"] = idem
		res, err := h.Create(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res, 400, 413, 503)
		if (env.ErrorCode == apierror.GuardrailsMissing) != fk.guardrails || (!fk.guardrails && env.ErrorCode != apierror.InvalidRequest) {
			t.Fatalf("answered %+v; the create reached the guardrails: %v", env, fk.guardrails)
		}
		var in session.CreateRequest
		if !sameDecode(t, req, httpapi.MaxBodyBytes, &in, env) {
			return
		}
		if fk.guardrails {
			in.IdempotencyKey = idem
			switch {
			case in.ProjectName == "" || len(in.ProjectName) > session.MaxNameLen,
				len(in.PersonaSlug) > session.MaxNameLen || !slug.MatchString(in.PersonaSlug),
				strings.TrimSpace(in.InitialPrompt) == "" || len(in.InitialPrompt) > session.MaxPromptBytes,
				in.SessionType != "" && in.SessionType != "coding" && in.SessionType != "setup",
				in.IdempotencyKey != "" && (len(in.IdempotencyKey) > session.MaxIdempotencyKeyLen || !printable.MatchString(in.IdempotencyKey)):
				t.Fatalf("accepted %+v", in)
			}
			if tc := in.TaskContext; tc != nil && (strings.HasPrefix(tc.Branch, "-") || strings.HasPrefix(tc.BaseBranch, "-") || tc.PullRequestNumber < 0) {
				t.Fatalf("accepted task context %+v", tc)
			}
		}
		if body, ok := reencode(t, in, httpapi.MaxBodyBytes); ok {
			again(t, h.Create, req, body, env)
		}
	})
}

// POST /api/remote_agents/{id}/messages, with any agent id in the path.
func FuzzMessages(f *testing.F) {
	key := session.AttachmentPrefix(sessionID) + "0a1b2c/notes.txt"
	f.Add(sessionID, `{"text":"hello","client_message_id":"m-1"}`)
	f.Add(sessionID, `{"answer":{"question_id":"q1","option_id":"o.2"}}`)
	f.Add(sessionID, `{"text":"see","attachments":[{"key":"`+key+`","name":"notes.txt","size_bytes":12,"content_type":"text/plain; charset=utf-8"}]}`)
	f.Add(sessionID, `{"env_values":{"API_KEY":"v"}}`)
	f.Add(sessionID, `{"text":"x","env_values":{"A":"v"}}`)
	f.Add(sessionID, `{"text":"x","attachments":[{"key":"sessions/other/attachments/0a/x","name":"..","size_bytes":-1}]}`)
	f.Add("../"+sessionID, `{"text":"hello"}`)
	f.Fuzz(func(t *testing.T, id, body string) {
		h, fk := newHandlers()
		req := request(fk.tok, body, false)
		req.PathParameters["id"] = id
		res, err := h.Messages(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if id != sessionID {
			// The token is not for that agent: nothing is read or reached.
			if env := httpapitest.Envelope(t, res, 404); env.ErrorCode != apierror.AgentNotFound || fk.reached {
				t.Fatalf("another agent's id answered %+v (reached: %v)", env, fk.reached)
			}
			return
		}
		env := httpapitest.Envelope(t, res, 400, 413, 503)
		if (res.StatusCode == 503) != fk.reached {
			t.Fatalf("answered %+v; reached the store: %v", env, fk.reached)
		}
		var in session.MessageRequest
		if !sameDecode(t, req, session.MaxMessageBytes+session.MaxEnvBytes, &in, env) {
			return
		}
		if fk.reached {
			if len(in.Text) > session.MaxMessageBytes || len(in.Attachments) > session.MaxAttachments ||
				(strings.TrimSpace(in.Text) == "" && len(in.Attachments) == 0 && in.Answer == nil && in.EnvValues == nil) ||
				(in.EnvValues != nil && (in.Text != "" || in.Answer != nil || len(in.Attachments) > 0)) {
				t.Fatalf("accepted %+v", in)
			}
			for _, a := range in.Attachments {
				if !strings.HasPrefix(a.Key, session.AttachmentPrefix(sessionID)) || a.SizeBytes < 0 || a.SizeBytes > session.MaxAttachmentBytes ||
					a.Name == "" || a.Name == ".." || strings.ContainsAny(a.Name, "/\\") {
					t.Fatalf("accepted attachment %+v", a)
				}
			}
			if len(fk.appended) == 1 {
				var m sandboxwire.UserMessage
				if err := sandboxwire.Decode(fk.appended[0].Data, &m); err != nil || fk.appended[0].Type != sandboxwire.TypeUserMessage || m.Text != in.Text || len(m.Attachments) != len(in.Attachments) {
					t.Fatalf("queued %+v (%v) for %+v", fk.appended[0], err, in)
				}
			}
		}
		if body, ok := reencode(t, in, session.MaxMessageBytes+session.MaxEnvBytes); ok {
			again(t, h.Messages, req, body, env)
		}
	})
}

// POST /api/remote_agents/{id}/env.
func FuzzSubmitEnv(f *testing.F) {
	f.Add(`{"values":{"API_KEY":"v"}}`)
	f.Add(`{"secrets":[{"key":"TOKEN","value":"s","persist":true},{"key":"B","value":""}],"saveToConfiguration":true}`)
	f.Add(`{"values":{"A":"1"},"secrets":[{"key":"A","value":"2"}]}`)
	f.Add(`{"values":{"1BAD":"v","":"x"}}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, body string) {
		h, fk := newHandlers()
		req := request(fk.tok, body, false)
		res, err := h.SubmitEnv(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res, 400, 413, 503)
		if (res.StatusCode == 503) != fk.reached {
			t.Fatalf("answered %+v; reached the object store: %v", env, fk.reached)
		}
		var in session.EnvSubmission
		if !sameDecode(t, req, session.MaxEnvBytes, &in, env) {
			return
		}
		if fk.reached {
			want := map[string]string{}
			for k, v := range in.Values {
				want[k] = v
			}
			for _, s := range in.Secrets {
				if _, dup := want[s.Key]; dup {
					t.Fatalf("accepted %s twice", s.Key)
				}
				want[s.Key] = s.Value
			}
			var stored map[string]string
			if err := json.Unmarshal(fk.put, &stored); err != nil || len(want) == 0 || len(want) > session.MaxEnvKeys || !mapsEqual(stored, want) {
				t.Fatalf("stored %s (%v) for %+v", fk.put, err, in)
			}
			for k, v := range stored {
				if !envKey.MatchString(k) || len(v) > session.MaxEnvValueBytes {
					t.Fatalf("accepted %q=%d bytes", k, len(v))
				}
			}
		}
		if body, ok := reencode(t, in, session.MaxEnvBytes); ok {
			again(t, h.SubmitEnv, req, body, env)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// attachmentBody is the body of POST /api/remote_agents/{id}/attachments.
type attachmentBody struct {
	Name        string `json:"name"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type"`
}

// POST /api/remote_agents/{id}/attachments.
func FuzzAttachments(f *testing.F) {
	f.Add(`{"name":"notes.txt","size_bytes":12,"content_type":"text/plain"}`)
	f.Add(`{"name":"a b.png","size_bytes":26214400}`)
	f.Add(`{"name":"../x","size_bytes":0,"content_type":"text/"}`)
	f.Add(`{"name":"txt.\u202eexe","size_bytes":1}`)
	f.Fuzz(func(t *testing.T, body string) {
		h, fk := newHandlers()
		req := request(fk.tok, body, false)
		res, err := h.Attachments(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res, 400, 413, 503)
		if (res.StatusCode == 503) != fk.reached {
			t.Fatalf("answered %+v; reached the object store: %v", env, fk.reached)
		}
		var in attachmentBody
		if !sameDecode(t, req, 4096, &in, env) {
			return
		}
		if fk.reached {
			upload, name, _ := strings.Cut(strings.TrimPrefix(fk.presigned, session.AttachmentPrefix(sessionID)), "/")
			if !strings.HasPrefix(fk.presigned, session.AttachmentPrefix(sessionID)) || upload == "" || name != in.Name ||
				name == "." || name == ".." || strings.ContainsAny(name, "/\\") || strings.IndexFunc(name, unicode.IsControl) >= 0 {
				t.Fatalf("presigned %q for %+v", fk.presigned, in)
			}
			if fk.presignLen != in.SizeBytes || in.SizeBytes < 1 || in.SizeBytes > session.MaxAttachmentBytes {
				t.Fatalf("presigned %d bytes for %+v", fk.presignLen, in)
			}
			if _, _, err := mime.ParseMediaType(fk.presignCT); err != nil || (in.ContentType != "" && fk.presignCT != in.ContentType) {
				t.Fatalf("presigned content type %q for %+v", fk.presignCT, in)
			}
		}
		if body, ok := reencode(t, in, 4096); ok {
			again(t, h.Attachments, req, body, env)
		}
	})
}
