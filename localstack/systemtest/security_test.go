package systemtest_test

// The security suite of issue 19 (go test -run '^TestSecurity' ./...): every
// route of api/openapi.json with every wrong credential, path traversal in
// every path-taking field, oversize and deeply nested bodies, header and log
// injection, and the workspace tools of a real agent trying to leave their
// workspace. Each case says what it checked (t.Logf "checked: …").

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/api"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// secResp is an answer: status, body (at most secMaxRead of it; none of an
// events stream) and headers.
type secResp struct {
	status  int
	raw     string
	headers http.Header
	body    map[string]any
}

func (r secResp) code() string { return r.str("error_code") }

func (r secResp) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

const secMaxRead = 1 << 20

// secTry sends one request as given (path may hold a query and encoded
// characters) and returns the answer, or the transport's error.
func (s *stack) secTry(method, path string, hdr http.Header, body []byte) (secResp, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), 60*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, rd)
	if err != nil {
		return secResp{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return secResp{}, err
	}
	defer func() { _ = res.Body.Close() }()
	r := secResp{status: res.StatusCode, headers: res.Header}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return r, nil // a stream that is let in: its status is the answer
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, secMaxRead))
	if err != nil {
		return secResp{}, err
	}
	r.raw = string(raw)
	_ = json.Unmarshal(raw, &r.body)
	return r, nil
}

func (s *stack) secDo(t testing.TB, method, path string, hdr http.Header, body []byte) secResp {
	t.Helper()
	r, err := s.secTry(method, path, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// secReady creates a session from body with the fake sandbox, acts as its
// sandbox until ready, and returns its id, session token and sandbox token;
// skip lists the sessions already there.
func (s *stack) secReady(t *testing.T, body map[string]any, skip map[string]bool) (string, string, string) {
	t.Helper()
	created := make(chan reply, 1)
	go func() { created <- s.create(body) }()
	id := s.firstSandboxExcept(t, skip)
	sb := s.sandboxToken(t, id)
	spec := s.call(http.MethodGet, "/sandbox/"+id+"/spec", sb, nil)
	if spec.status != http.StatusOK {
		t.Fatalf("spec: %d %s", spec.status, spec.raw)
	}
	hash := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash}); r.status != http.StatusOK {
		t.Fatalf("ready: %d %s", r.status, r.raw)
	}
	r := <-created
	if r.status != http.StatusOK || r.str("agent_id") != id {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	skip[id] = true
	return id, r.str("session_token"), sb
}

// secEnded writes a session that ended ago straight to the store, with its
// tokens, and returns its id, session token and sandbox token.
func (s *stack) secEnded(t *testing.T, ago time.Duration) (string, string, string) {
	t.Helper()
	tok, tokHash := token.New(token.Session)
	sb, sbHash := token.New(token.Sandbox)
	ended := time.Now().UTC().Add(-ago)
	sess := session.Session{
		ID: uuid.NewString(), Blueprint: session.Blueprint{
			PersonaSlug:     "assistant",
			ProjectName:     "demo",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-expired",
		},
		Tenant: "dev",
		State:  session.Ended, Reason: session.ReasonShutdown, Generation: 1, TokenHashes: []string{tokHash}, SandboxTokenHash: sbHash,
		CreatedAt: ended.Add(-time.Minute), UpdatedAt: ended, ReadyAt: ended.Add(-time.Minute), EndedAt: ended,
	}
	if err := s.srv.Env.SessionStore().Create(t.Context(), sess, nil); err != nil {
		t.Fatal(err)
	}
	return sess.ID, tok, sb
}

// secOp is one operation of api/openapi.json.
type secOp struct {
	method, path string
	// schemes are the security schemes it takes (any one of them).
	schemes []string
	// statuses are the statuses it documents ("default" for any).
	statuses map[string]bool
	body     bool
}

func (o secOp) String() string { return o.method + " " + o.path }

// documents reports whether the operation documents status.
func (o secOp) documents(status int) bool {
	return o.statuses[strconv.Itoa(status)] || o.statuses["default"]
}

// secOps reads every operation of the API's document: a route added there
// is in the suite.
func secOps(t testing.TB) []secOp {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var ops []secOp
	for path, item := range doc.Paths {
		for method, raw := range item {
			if !slices.Contains([]string{"get", "post", "put", "patch", "delete"}, method) {
				continue
			}
			var op struct {
				Security    []map[string][]string      `json:"security"`
				Responses   map[string]json.RawMessage `json:"responses"`
				RequestBody json.RawMessage            `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			o := secOp{method: strings.ToUpper(method), path: path, statuses: map[string]bool{}, body: op.RequestBody != nil}
			for _, alt := range op.Security {
				for name := range alt {
					o.schemes = append(o.schemes, name)
				}
			}
			slices.Sort(o.schemes)
			for st := range op.Responses {
				o.statuses[st] = true
			}
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b secOp) int { return strings.Compare(a.String(), b.String()) })
	if len(ops) < 30 {
		t.Fatalf("the document has %d operations: not the API's", len(ops))
	}
	return ops
}

// secClass is the kind of credential an operation takes, by its schemes:
// an operation of schemes the suite does not know fails it, so that a new
// kind of route gets its expectations written.
func secClass(t testing.TB, op secOp) string {
	t.Helper()
	if strings.HasPrefix(op.path, "/proliferate/") && strings.Join(op.schemes, "+") == "sandboxToken" {
		return "tool" // the gateway tools: any caller but the session's running sandbox is 403 (agent-contract.md)
	}
	switch strings.Join(op.schemes, "+") {
	case "appKey":
		return "app"
	case "sessionBearer", "sessionBearer+sessionHeader+sessionQuery":
		return "session"
	case "sessionQuery":
		return "embed"
	case "sandboxToken", "modelApiKey+modelGoogApiKey+sandboxToken":
		return "sandbox"
	case "bootstrapCode":
		if strings.HasPrefix(op.path, "/sandbox-pool/") {
			return "pool"
		}
		return "bootstrap"
	case "poolKey":
		return "pool"
	case "appKey+sessionBearer":
		return "kill"
	case "orchestratorSigV4":
		return "internal"
	case "e2bApiKey":
		if strings.Contains(op.path, "{id}") {
			return "e2bSandbox"
		}
		return "e2b"
	}
	t.Fatalf("%s takes %v, which the security suite does not classify: add its expectations to secClass and secWant", op, op.schemes)
	return ""
}

// secPath fills an operation's path parameters: agent for the agent's id,
// other values the route needs to be reached.
func secPath(t testing.TB, op secOp, agent string) string {
	t.Helper()
	return secPathSpelled(t, op, agent, "")
}

// secPathSpelled is secPath with its first parameter spelled as given (as
// it goes on the wire), unless spelled is "".
func secPathSpelled(t testing.TB, op secOp, agent, spelled string) string {
	t.Helper()
	var out []string
	for _, seg := range strings.Split(op.path, "/") {
		name, ok := strings.CutPrefix(seg, "{")
		if !ok {
			out = append(out, seg)
			continue
		}
		name = strings.TrimSuffix(name, "}")
		switch {
		case spelled != "":
			seg, spelled = spelled, ""
		case name == "id" && strings.HasPrefix(op.path, "/api/v1/agent-types/"):
			seg = "default"
		case name == "id" && strings.HasPrefix(op.path, "/api/v1/webhooks/"):
			seg = "wh_aaaaaaaaaaaaaaaaaaaaaaaaaa" // of the form, of no app
		case name == "id" && strings.HasPrefix(op.path, "/internal/"):
			seg = uuid.NewString()
		case name == "id" || name == "sessionId":
			seg = agent
		case name == "toolName":
			seg = "verify"
		case name == "tool":
			seg = "read"
		case name == "provider":
			seg = "anthropic"
		case name == "proxy":
			seg = "v1/messages"
		case name == "sandboxId":
			seg = "pool-" + uuid.NewString()
		case name == "name":
			seg = "api-key" // a secret's
		default:
			t.Fatalf("%s: path parameter %q: the security suite does not know what to put there", op, name)
		}
		out = append(out, seg)
	}
	return strings.Join(out, "/")
}

// secCred is a credential and what kind of thing it is.
type secCred struct {
	name, value string
	// kind: none, garbage, basic (an Authorization of another scheme),
	// session, sandbox, bootstrap, app (a registered key in the agents'
	// tenant), apptoken (a token-shaped key of another tenant), and own:
	// the target agent's own token of that kind.
	kind string
	own  bool
}

// secWant is the documented answer for a credential on a class of route;
// status 0: the credential is valid there (not a wrong one).
type secWant struct {
	status int
	code   string // "": any code of the status (or an HTML page)
}

func secExpect(class string, c secCred) secWant {
	missing, invalid, forbidden := secWant{401, "missing_token"}, secWant{401, "invalid_token"}, secWant{403, "forbidden"}
	if class == "internal" {
		return forbidden // IAM: anything but the orchestrator's signature
	}
	if class == "tool" {
		if c.kind == "sandbox" && c.own {
			return secWant{}
		}
		return forbidden // "reject non-sandbox sources (403)"
	}
	if c.kind == "none" {
		if class == "embed" {
			return secWant{401, ""}
		}
		return missing
	}
	if c.kind == "basic" {
		return secWant{401, ""}
	}
	switch class {
	case "session", "embed":
		if c.kind == "session" && c.own {
			return secWant{}
		}
		if class == "embed" {
			return secWant{401, ""}
		}
		return invalid
	case "app":
		if c.kind == "app" || c.kind == "apptoken" {
			return secWant{} // a key: its own tenant's (tenancy_test.go)
		}
		return invalid
	case "e2b", "e2bSandbox":
		switch {
		case c.kind == "app", c.kind == "apptoken" && class == "e2b":
			return secWant{} // a key: its own tenant's sandboxes
		case c.kind == "apptoken":
			return secWant{404, "not_found"} // another tenant's sandbox is not found
		}
		return invalid
	case "kill":
		switch {
		case c.kind == "session" && c.own, c.kind == "app":
			return secWant{}
		case c.kind == "apptoken":
			return secWant{404, "agent_not_found"} // another tenant's agent is not found
		}
		return invalid
	case "sandbox":
		switch {
		case c.kind == "sandbox" && c.own:
			return secWant{}
		case c.kind == "session" || c.kind == "apptoken":
			return forbidden
		}
		return invalid
	case "bootstrap":
		if c.kind == "session" || c.kind == "apptoken" {
			return forbidden
		}
		return invalid
	case "pool":
		switch c.kind {
		case "session", "apptoken", "sandbox":
			return forbidden
		case "bootstrap":
			return secWant{} // a well-formed pool key of no pool sandbox: not a credential kind mistake
		}
		return invalid
	}
	return secWant{-1, ""}
}

// secPlace puts credential v where scheme carries it.
func secPlace(scheme, v string, h http.Header, q url.Values) {
	switch scheme {
	case "sessionHeader":
		h.Set("X-Session-Token", v)
	case "sessionQuery":
		q.Set("token", v)
	case "modelApiKey":
		h.Set("X-Api-Key", v)
	case "modelGoogApiKey":
		h.Set("X-Goog-Api-Key", v)
	case "e2bApiKey":
		h.Set("X-API-Key", v)
	default: // bearer schemes, and the orchestrator's Authorization
		h.Set("Authorization", "Bearer "+v)
	}
}

// secValidBody is a body the operation would take from its own agent, so
// that what answers is the agent's state, not the body's shape.
func secValidBody(op secOp) []byte {
	if !op.body {
		return nil
	}
	switch {
	case strings.HasSuffix(op.path, "/messages"):
		return []byte(`{"text":"still there?"}`)
	case strings.HasSuffix(op.path, "/env"):
		return []byte(`{"values":{"SEC_KEY":"value"}}`)
	case strings.HasSuffix(op.path, "/attachments"):
		return []byte(`{"name":"a.txt","size_bytes":1,"content_type":"text/plain"}`)
	case strings.HasPrefix(op.path, "/proliferate/"):
		return []byte(`{"tool_call_id":"sec-call-1","args":{}}`)
	case strings.HasSuffix(op.path, "/events"):
		return []byte(`{"events":[{"type":"agent.message","data":{"text":"late"}}]}`)
	case strings.HasSuffix(op.path, "/status"):
		return []byte(`{"state":"idle"}`)
	}
	return []byte(`{}`)
}

// secSnapshot is what the suite checks no wrong credential changed of a
// session: its record's state and credentials, its events, its inbox.
type secSnapshot struct {
	state, reason string
	generation    int
	tokens        string
	events        string
	inbox         string
}

func (s *stack) secSnap(t *testing.T, id, sb string) secSnapshot {
	t.Helper()
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, e := range evs {
		raw, _ := json.Marshal(e.Data)
		seqs = append(seqs, fmt.Sprintf("%d:%s:%s", e.Seq, e.Type, raw))
	}
	snap := secSnapshot{state: string(sess.State), reason: string(sess.Reason), generation: sess.Generation,
		tokens: strings.Join(sess.TokenHashes, ",") + "|" + sess.SandboxTokenHash, events: strings.Join(seqs, "\n")}
	if sb != "" && !sess.State.Terminal() {
		r := s.call(http.MethodGet, "/sandbox/"+id+"/inbox", sb, nil)
		if r.status != http.StatusOK {
			t.Fatalf("inbox: %d %s", r.status, r.raw)
		}
		snap.inbox = r.raw
	}
	return snap
}

// TestSecurityEveryRouteRefusesWrongCredentials (issue 19): every operation
// of api/openapi.json (derived from the document: a new route is in the
// suite, and one of an unknown kind of credential fails it), with every wrong
// credential in every place its schemes carry one (Authorization, the
// X-Session-Token and X-Api-Key headers, ?token=): none, malformed, another
// scheme's header, well-formed tokens of no session, another agent's session
// and sandbox tokens, the agent's own token of the wrong kind, the app key
// where a session or sandbox token is needed and a session token where an
// app key is, another tenant's app key, an ended agent's, a killed agent's
// and an agent's past its grace. Each answer is the status and code the
// document gives that case (401 missing_token / invalid_token, 403 forbidden,
// 404 for another tenant's agent), documented for the route, and none of the
// agents' data is in any answer. Then: the target's and the other agent's
// records, events and inboxes are as they were (0 cross-agent reads or
// writes), and the ended agents' own tokens no longer work on their own
// sandbox routes nor, past the grace, on their session routes, and write
// nothing within it.
func TestSecurityEveryRouteRefusesWrongCredentials(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	ops := secOps(t)

	// Agents: A, the target; B, another; E, shut down; K, killed; X, ended
	// past the grace of its tokens.
	skip := map[string]bool{}
	const markerA, markerB = "sec-marker-of-agent-A-7d1f", "sec-marker-of-agent-B-93ac"
	a, tokA, sbA := s.secReady(t, createBody("Hello "+markerA), skip)
	b, tokB, sbB := s.secReady(t, createBody("Hello "+markerB), skip)
	e, tokE, sbE := s.secReady(t, createBody("Hello"), skip)
	k, tokK, sbK := s.secReady(t, createBody("Hello"), skip)
	x, tokX, sbX := s.secEnded(t, session.TokenGrace+5*time.Minute)
	for id, sb := range map[string]string{a: sbA, b: sbB} {
		marker := map[string]string{a: markerA, b: markerB}[id]
		s.appendEvents(t, id, sb, event("agent.message", map[string]any{"text": "data of " + marker}))
		if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", map[string]string{a: tokA, b: tokB}[id], map[string]any{"text": "message to " + marker}); r.status != http.StatusOK {
			t.Fatalf("message: %d %s", r.status, r.raw)
		}
	}
	if r := s.shutdown(e, tokE); r.str("status") != "shutdown_initiated" {
		t.Fatalf("shutdown: %s", r.raw)
	}
	if r := s.call(http.MethodPost, "/sandbox/"+e+"/status", sbE, map[string]any{"state": "ended"}); r.status != http.StatusOK {
		t.Fatalf("ended: %d %s", r.status, r.raw)
	}
	if r := s.call(http.MethodPost, "/api/remote_agents/"+k+"/kill", appKey, nil); r.str("status") != "killed" {
		t.Fatalf("kill: %d %s", r.status, r.raw)
	}
	// Another tenant's app key, shaped like a token (a sandbox route tells
	// it from a sandbox token by its form).
	otherApp, otherHash := token.New(token.AppKey)
	if err := s.srv.Env.Registry().PutAppKey(t.Context(), registry.AppKey{ID: "sec-other", Hash: otherHash, Tenant: "sec-other"}); err != nil {
		t.Fatal(err)
	}
	unknownSession, _ := token.New(token.Session)
	unknownSandbox, _ := token.New(token.Sandbox)
	unknownCode, _ := token.New(token.Bootstrap)
	creds := []secCred{
		{"no credential", "", "none", false},
		{"a malformed token", "not a token!", "garbage", false},
		{"a truncated session token", tokA[:20], "garbage", false},
		{"a Basic credential", "Basic dXNlcjpwYXNzd29yZA==", "basic", false},
		{"a session token of no session", unknownSession, "session", false},
		{"a sandbox token of no session", unknownSandbox, "sandbox", false},
		{"a bootstrap code of no session", unknownCode, "bootstrap", false},
		{"another agent's session token", tokB, "session", false},
		{"another agent's sandbox token", sbB, "sandbox", false},
		{"the agent's own session token", tokA, "session", true},
		{"the agent's own sandbox token", sbA, "sandbox", true},
		{"the app key", appKey, "app", false},
		{"another tenant's app key", otherApp, "apptoken", false},
		{"a shut-down agent's session token", tokE, "session", false},
		{"a shut-down agent's sandbox token", sbE, "sandbox", false},
		{"a killed agent's session token", tokK, "session", false},
		{"a killed agent's sandbox token", sbK, "sandbox", false},
		{"an ended agent's session token past its grace", tokX, "session", false},
		{"an ended agent's sandbox token", sbX, "sandbox", false},
	}
	secrets := []string{markerA, markerB, tokA, sbA, tokB, sbB}

	// The live agents' sandboxes (the test) keep beating, so that a slow run
	// does not lose them.
	beat := func() {
		for id, sb := range map[string]string{a: sbA, b: sbB} {
			if r := s.call(http.MethodPost, "/sandbox/"+id+"/heartbeat", sb, map[string]any{}); r.status != http.StatusOK {
				t.Fatalf("heartbeat: %d %s", r.status, r.raw)
			}
		}
	}
	beat()
	beforeA, beforeB := s.secSnap(t, a, sbA), s.secSnap(t, b, sbB)
	beforeE, beforeK := s.secSnap(t, e, ""), s.secSnap(t, k, "")

	// send asks op with credential c in the place of scheme (none: nowhere;
	// basic: the Authorization header as it is).
	send := func(op secOp, agent string, c secCred, scheme string) secResp {
		h, q := http.Header{}, url.Values{}
		switch c.kind {
		case "none":
		case "basic":
			h.Set("Authorization", c.value)
		default:
			secPlace(scheme, c.value, h, q)
		}
		path := secPath(t, op, agent)
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var body []byte
		if op.body {
			body = []byte(`{}`)
		}
		if c.own {
			body = secValidBody(op)
		}
		return s.secDo(t, op.method, path, h, body)
	}
	requests := 0
	for _, op := range ops {
		class := secClass(t, op)
		beat()
		t.Run(op.String(), func(t *testing.T) {
			for _, c := range creds {
				want := secExpect(class, c)
				if want.status == 0 {
					continue // valid here: not a wrong credential
				}
				if want.status < 0 {
					t.Fatalf("no expectation for %s on a %s route", c.name, class)
				}
				schemes := op.schemes
				if c.kind == "none" || c.kind == "basic" {
					schemes = schemes[:1]
				}
				for _, scheme := range schemes {
					r := send(op, a, c, scheme)
					requests++
					if r.status != want.status || (want.code != "" && r.code() != want.code) {
						t.Errorf("%s in %s: %d %.200s, want %d %s", c.name, scheme, r.status, r.raw, want.status, want.code)
					}
					if !op.documents(r.status) {
						t.Errorf("%s in %s: %d, which the document does not give for this route", c.name, scheme, r.status)
					}
					for _, secret := range secrets {
						if strings.Contains(r.raw, secret) {
							t.Errorf("%s in %s: the answer holds another agent's data or token (%.12s…)", c.name, scheme, secret)
						}
					}
				}
			}
			t.Logf("checked: every wrong credential on a %s route gets its documented status and nothing of any agent", class)
		})
	}

	// The ended agents' own tokens on their own routes.
	for _, op := range ops {
		class := secClass(t, op)
		if class != "session" && class != "embed" && class != "sandbox" && class != "bootstrap" && class != "tool" {
			continue
		}
		t.Run("own tokens of ended agents/"+op.String(), func(t *testing.T) {
			for _, own := range []struct {
				what, id, tok, sb string
				expired           bool
			}{{"shut down", e, tokE, sbE, false}, {"killed", k, tokK, sbK, false}, {"past its grace", x, tokX, sbX, true}} {
				switch class {
				case "sandbox", "bootstrap", "tool":
					r := send(op, own.id, secCred{value: own.sb, kind: "sandbox", own: true}, op.schemes[0])
					requests++
					want := secWant{401, "invalid_token"}
					if class == "tool" {
						want = secWant{403, "forbidden"}
					}
					if r.status != want.status || r.code() != want.code {
						t.Errorf("a %s agent's sandbox token on its own route: %d %.200s, want %d %s", own.what, r.status, r.raw, want.status, want.code)
					}
				case "session", "embed":
					r := send(op, own.id, secCred{value: own.tok, kind: "session", own: true}, op.schemes[0])
					requests++
					switch {
					case own.expired && (r.status != http.StatusUnauthorized || (class == "session" && r.code() != "invalid_token")):
						t.Errorf("a %s agent's session token on its own route: %d %.200s, want 401 invalid_token", own.what, r.status, r.raw)
					case !own.expired && op.method != http.MethodGet && !strings.HasSuffix(op.path, "/shutdown") && r.status != http.StatusConflict && r.status != http.StatusNotFound:
						t.Errorf("a %s agent's session token, in its grace, writing: %d %.200s, want 409 agent_not_alive (or 404)", own.what, r.status, r.raw)
					}
					if !op.documents(r.status) {
						t.Errorf("a %s agent's own session token: %d, which the document does not give for this route", own.what, r.status)
					}
				}
			}
			t.Logf("checked: ended and killed agents' sandbox tokens are 401 on their own routes; their session tokens write nothing in the grace and are 401 past it")
		})
	}

	if got := s.secSnap(t, a, sbA); got != beforeA {
		t.Errorf("the target agent changed:\n%+v\nwas\n%+v", got, beforeA)
	}
	if got := s.secSnap(t, b, sbB); got != beforeB {
		t.Errorf("the other agent changed:\n%+v\nwas\n%+v", got, beforeB)
	}
	if got := s.secSnap(t, e, ""); got != beforeE {
		t.Errorf("the shut-down agent changed:\n%+v\nwas\n%+v", got, beforeE)
	}
	if got := s.secSnap(t, k, ""); got != beforeK {
		t.Errorf("the killed agent changed:\n%+v\nwas\n%+v", got, beforeK)
	}
	t.Logf("checked: %d requests on %d operations with %d credentials; no agent's record, events or inbox changed", requests, len(ops), len(creds))
}

// secValid is the credential the suite holds for a class of route (the
// target agent's own), or "" where it holds none it may use without harm.
func secValid(class, tok, sb string) string {
	switch class {
	case "app":
		return appKey
	case "session", "embed":
		return tok
	case "sandbox", "tool":
		return sb
	case "e2b", "e2bSandbox":
		return devtest.E2BKey
	}
	return ""
}

// TestSecurityPathTraversalIsRefused (issue 19): every path-taking field
// outside the sandbox's own file tools (which TestSecurityWorkspaceTools…
// covers) refuses a way out, with the standard error envelope, and nothing of
// another agent is read or written: the ids in every route's URL (.., %2e%2e,
// encoded slashes and backslashes, double encoding, NUL, another agent's id
// behind ../), the internal routes under another spelling, attachment names
// and the attachment keys a message names, upload paths and tool call ids
// (object keys), the gateway tools' path arguments (verify's folder,
// save_env_files' paths), agent type ids (in bodies and URLs: .., /, and the
// registry's key separator #) and the repository URLs and branches of a
// task context and an agent type (file:, ../, internal hosts).
func TestSecurityPathTraversalIsRefused(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	skip := map[string]bool{}
	const markerB = "sec-marker-of-agent-B-5e2d"
	a, tokA, sbA := s.secReady(t, createBody("Hello"), skip)
	b, tokB, sbB := s.secReady(t, createBody("Hello "+markerB), skip)
	s.appendEvents(t, b, sbB, event("agent.message", map[string]any{"text": "data of " + markerB}))
	beat := func() {
		for id, sb := range map[string]string{a: sbA, b: sbB} {
			if r := s.call(http.MethodPost, "/sandbox/"+id+"/heartbeat", sb, map[string]any{}); r.status != http.StatusOK {
				t.Fatalf("heartbeat: %d %s", r.status, r.raw)
			}
		}
	}
	beforeA, beforeB := s.secSnap(t, a, sbA), s.secSnap(t, b, sbB)
	noLeak := func(t *testing.T, what string, r secResp) {
		t.Helper()
		for _, secret := range []string{markerB, tokB, sbB} {
			if strings.Contains(r.raw, secret) {
				t.Errorf("%s: the answer holds the other agent's data: %.200s", what, r.raw)
			}
		}
	}
	envelope := func(t *testing.T, what string, r secResp, statuses ...int) {
		t.Helper()
		if !slices.Contains(statuses, r.status) {
			t.Errorf("%s: %d %.200s, want one of %v", what, r.status, r.raw, statuses)
			return
		}
		// The sandbox API's errors are E2B's body: code, the status.
		if r.status >= 400 && (r.code() == "" || (r.body["status"] != float64(r.status) && r.body["code"] != float64(r.status)) || r.body["message"] == nil) {
			t.Errorf("%s: %d is not the error envelope: %.200s", what, r.status, r.raw)
		}
	}

	t.Run("ids in URLs", func(t *testing.T) {
		spellings := []string{
			"..", "%2e%2e", "%2E%2e", ".%2e", "..%2f" + b, "..%2F..%2Finternal%2Fagents", "%2e%2e%2f%2e%2e%2fapi%2fremote_agents%2f" + b,
			a + "%2f..%2f" + b, a + "%2F%2E%2E%2F" + b, a + "%00", "%00", "%252e%252e%252f" + b, "..%5c" + b, "%5c..%5c" + b,
			a + "%0d%0a", "~" + b, "." + b,
		}
		n := 0
		for _, op := range secOps(t) {
			class := secClass(t, op)
			cred := secValid(class, tokA, sbA)
			beat()
			for _, sp := range spellings {
				path := secPathSpelled(t, op, a, sp)
				if !strings.Contains(op.path, "{") {
					path = op.path + "/" + sp // a route of no id: a segment more
				}
				h, q := http.Header{}, url.Values{}
				if cred != "" {
					secPlace(op.schemes[0], cred, h, q)
				}
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				var body []byte
				if op.body {
					body = []byte(`{}`)
				}
				r := s.secDo(t, op.method, path, h, body)
				n++
				noLeak(t, op.String()+" "+sp, r)
				switch {
				case r.status == http.StatusOK && strings.HasSuffix(op.path, "/alive"):
					// alive answers an id it does not know as unknown
					if r.body["state"] != "unknown" || r.body["alive"] != false {
						t.Errorf("alive of %q: %.200s", sp, r.raw)
					}
				case strings.HasPrefix(op.path, "/embed/"):
					if r.status != http.StatusUnauthorized && r.status != http.StatusNotFound {
						t.Errorf("embed of %q: %d", sp, r.status)
					}
				default:
					envelope(t, op.String()+" "+sp, r, 400, 401, 403, 404, 405)
				}
			}
		}
		t.Logf("checked: %d requests: every route with its id spelled as a way out (%d spellings), with the target agent's own credential, is refused in the envelope and shows nothing of the other agent", n, len(spellings))

		for _, p := range []string{"//internal/agents", "/./internal/agents", "///internal/agents", "/api/../internal/agents", "/%2e%2e/internal/agents"} {
			// A path that is not clean matches no route, as API Gateway
			// matches paths as sent: not_found, before any handler (and no
			// redirect to the clean path).
			r := s.secDo(t, http.MethodGet, p, nil, nil)
			envelope(t, p, r, 404)
			if r.str("error_code") != "not_found" {
				t.Errorf("%s: %.200s, want not_found", p, r.raw)
			}
		}
		t.Logf("checked: the internal routes spelled //internal/…, /./internal/… or through .. match no route (not_found), reaching no handler")
	})

	t.Run("attachment names and keys", func(t *testing.T) {
		base := "/api/remote_agents/" + a + "/attachments"
		for _, name := range []string{"../x", "..", ".", "a/b", "../../" + b + "/attachments/x", `..\..\x`, "/etc/passwd", "x\x00y", "x\ny", "\u202etxt.exe", ""} {
			r := s.secDo(t, http.MethodPost, base, secBearer(tokA), secJSON(t, map[string]any{"name": name, "size_bytes": 10, "content_type": "text/plain"}))
			envelope(t, "attachment "+strconv.Quote(name), r, 400)
		}
		for _, name := range []string{"%2e%2e%2fx", "..x", "x..", "a.b"} {
			r := s.secDo(t, http.MethodPost, base, secBearer(tokA), secJSON(t, map[string]any{"name": name, "size_bytes": 10, "content_type": "text/plain"}))
			key, _ := r.body["key"].(string)
			if r.status != http.StatusOK || !strings.HasPrefix(key, "sessions/"+a+"/attachments/") || slices.Contains(strings.Split(key, "/"), "..") || !strings.HasSuffix(key, "/"+name) {
				t.Errorf("attachment %q: %d %.200s: want a key under the agent's attachments", name, r.status, r.raw)
			}
		}
		t.Logf("checked: names with .., /, \\, NUL, newlines or bidi controls are 400; odd but plain names stay under sessions/<agent>/attachments/")
		for _, key := range []string{
			"sessions/" + b + "/attachments/0123456789abcdef/x.txt",
			"sessions/" + a + "/attachments/../../" + b + "/attachments/0123456789abcdef/x.txt",
			"sessions/" + a + "/attachments/0123456789abcdef/../../../" + b + "/x.txt",
			"sessions/" + a + "/tools/verify/x/y",
			"/sessions/" + a + "/attachments/0123456789abcdef/x.txt",
		} {
			r := s.secDo(t, http.MethodPost, "/api/remote_agents/"+a+"/messages", secBearer(tokA),
				secJSON(t, map[string]any{"text": "see", "attachments": []any{map[string]any{"key": key, "name": "x.txt", "size_bytes": 1, "content_type": "text/plain"}}}))
			envelope(t, "message naming "+key, r, 400)
		}
		t.Logf("checked: a message naming an upload of another agent, or one reached through ../, is 400")
	})

	t.Run("upload paths and call ids", func(t *testing.T) {
		for _, p := range []string{"../x", "/etc/passwd", "a/../../b", "a//b", "./a", "a/./b", "a\x00b", "..", "", "a/\nb", "a/.."} {
			r := s.secDo(t, http.MethodPost, "/sandbox/"+a+"/uploads", secBearer(sbA),
				secJSON(t, map[string]any{"tool": "verify", "tool_call_id": "sec-1", "files": []any{map[string]any{"path": p, "size_bytes": 1, "content_type": "text/plain"}}}))
			envelope(t, "upload path "+strconv.Quote(p), r, 400)
		}
		for _, id := range []string{"../../" + b, "..", "%2e%2e", "../../../sessions/" + b + "/attachments"} {
			r := s.secDo(t, http.MethodPost, "/sandbox/"+a+"/uploads", secBearer(sbA),
				secJSON(t, map[string]any{"tool": "verify", "tool_call_id": id, "files": []any{map[string]any{"path": "report.txt", "size_bytes": 1, "content_type": "text/plain"}}}))
			if r.status != http.StatusOK {
				t.Errorf("upload for call %q: %d %.200s", id, r.status, r.raw)
				continue
			}
			for _, u := range r.body["uploads"].([]any) {
				key := u.(map[string]any)["key"].(string)
				if !strings.HasPrefix(key, "sessions/"+a+"/tools/verify/") || slices.Contains(strings.Split(key, "/"), "..") || strings.Contains(key, b) {
					t.Errorf("call id %q gives the key %q", id, key)
				}
			}
		}
		t.Logf("checked: upload paths out of the folder are 400; tool call ids never reach an object key as written (hashed under the agent's prefix)")
	})

	t.Run("gateway tool path arguments", func(t *testing.T) {
		for i, folder := range []string{"../", "../../" + b, "/etc", "a/../../b", "~", "~/.ssh", "x\x00", `..\..\x`, ".."} {
			r := s.secDo(t, http.MethodPost, "/proliferate/"+a+"/tools/verify", secBearer(sbA),
				secJSON(t, map[string]any{"tool_call_id": fmt.Sprintf("sec-verify-%d", i), "args": map[string]any{"folder": folder}}))
			envelope(t, "verify folder "+strconv.Quote(folder), r, 400)
			if r.body["success"] != false {
				t.Errorf("verify folder %q: not a tool error: %.200s", folder, r.raw)
			}
		}
		t.Logf("checked: verify's folder out of the workspace (.., absolute, ~, NUL, backslashes) is 400")
	})

	t.Run("save_env_files paths of a setup session", func(t *testing.T) {
		setup, _, sbSetup := s.secReady(t, setupBody(), skip)
		cfgBefore, err := s.srv.Env.Registry().Configuration(t.Context(), "dev", "demo-web")
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range []map[string]any{
			{"path": "../../.env"}, {"path": "/etc/profile.d/x.sh"}, {"path": "~/.bashrc"}, {"path": "a/../../b"},
			{"path": ".env", "workspacePath": "../.."}, {"path": ".env", "workspacePath": "/"}, {"path": ".env\x00/../../x"},
		} {
			f["format"], f["mode"], f["keys"] = "dotenv", "secret", []any{map[string]any{"key": "A", "required": true}}
			r := s.secDo(t, http.MethodPost, "/proliferate/"+setup+"/tools/save_env_files", secBearer(sbSetup),
				secJSON(t, map[string]any{"tool_call_id": fmt.Sprintf("sec-env-%d", i), "args": map[string]any{"files": []any{f}}}))
			envelope(t, fmt.Sprintf("save_env_files %v", f["path"]), r, 400)
		}
		cfgAfter, err := s.srv.Env.Registry().Configuration(t.Context(), "dev", "demo-web")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(cfgAfter.EnvFiles) != fmt.Sprint(cfgBefore.EnvFiles) {
			t.Errorf("the configuration's env files changed: %+v", cfgAfter.EnvFiles)
		}
		t.Logf("checked: save_env_files paths and workspace paths out of the workspace are 400, and the configuration is unchanged")
	})

	t.Run("agent type ids", func(t *testing.T) {
		for _, id := range []string{"../x", "..", "a/b", "a#b", "dev#x", "default#other", "x\x00", "%2e%2e", "A", "-x", strings.Repeat("a", 200)} {
			r := s.secDo(t, http.MethodPost, agentTypes, secBearer(appKey), secJSON(t, map[string]any{"id": id, "name": "X"}))
			envelope(t, "agent type "+strconv.Quote(id), r, 400)
		}
		for _, id := range []string{"..", "%2e%2e", "..%2fdefault", "default%23x", "a%23b", "%00", "default%2f..%2fdefault", "..%5cdefault"} {
			for _, m := range []string{http.MethodGet, http.MethodPut} {
				path := agentTypes + "/" + id + "/workspace-config"
				var body []byte
				if m == http.MethodPut {
					body = []byte(`{"enabled":true}`)
				}
				r := s.secDo(t, m, path, secBearer(appKey), body)
				envelope(t, m+" "+path, r, 400, 404)
			}
		}
		body := createBody("Hello")
		body["agent_type"] = "../default"
		envelope(t, "create with agent_type ../default", s.secDo(t, http.MethodPost, "/api/remote_agents/create", secBearer(appKey), secJSON(t, body)), 400)
		t.Logf("checked: agent type ids with .., /, #, NUL or encodings are 400 in bodies and 400/404 in URLs; create refuses ../default")
	})

	t.Run("repository URLs and branches", func(t *testing.T) {
		for _, tc := range []map[string]any{
			{"repository_url": "file:///etc/passwd"}, {"repository_url": "../../" + b}, {"repository_url": "/srv/repos/app"},
			{"repository_url": "ext::sh -c id"}, {"repository_url": "https://169.254.169.254/latest/meta-data.git"},
			{"repository_url": "https://[::ffff:a9fe:a9fe]/x.git"}, {"repository_url": "https://10.0.0.1/org/repo"},
			{"repository_url": "https://github.com/org/repo", "branch": "../../etc"}, {"repository_url": "https://github.com/org/repo", "branch": "--upload-pack=id"},
		} {
			body := createBody("Hello")
			body["task_context"] = tc
			envelope(t, fmt.Sprintf("task_context %v", tc), s.secDo(t, http.MethodPost, "/api/remote_agents/create", secBearer(appKey), secJSON(t, body)), 400)
		}
		for i, u := range []string{"file:///etc", "https://169.254.169.254/x.git", "https://git.localhost/x.git", "https://[::ffff:10.0.0.1]/x.git", "../x"} {
			r := s.secDo(t, http.MethodPost, agentTypes, secBearer(appKey), secJSON(t, map[string]any{"id": fmt.Sprintf("sec-repo-%d", i), "name": "X",
				"workspace_config": map[string]any{"enabled": true, "repo_source": map[string]any{"type": "fixed", "url": u}}}))
			envelope(t, "agent type repository "+u, r, 400)
		}
		t.Logf("checked: file:, relative, ext:: and internal-host repository URLs and option-like or .. branches are 400 at create and on agent types")
	})

	if got := s.secSnap(t, a, sbA); got.events != beforeA.events || got.state != beforeA.state || got.tokens != beforeA.tokens {
		t.Errorf("the target agent changed:\n%+v\nwas\n%+v", got, beforeA)
	}
	if got := s.secSnap(t, b, sbB); got != beforeB {
		t.Errorf("the other agent changed:\n%+v\nwas\n%+v", got, beforeB)
	}
	t.Logf("checked: neither agent's record or events changed")
}

func secBearer(tok string) http.Header {
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func secJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// secNested is a JSON value depth levels deep: arrays, or objects.
func secNested(depth int, objects bool) []byte {
	open, end := "[", "]"
	if objects {
		open, end = `{"a":`, "}"
	}
	return []byte(`{"text":` + strings.Repeat(open, depth) + "1" + strings.Repeat(end, depth) + `}`)
}

// secLarge is a JSON object of about n bytes.
func secLarge(n int) []byte {
	return []byte(`{"text":"` + strings.Repeat("x", n) + `"}`)
}

// secSign signs req as the dev orchestrator (the /internal/ routes' IAM).
func (s *stack) secSign(t testing.TB, req *http.Request, body []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	creds := newOrchestrator(s).creds
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hex.EncodeToString(sum[:]), "execute-api", s.srv.Env.AWS.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestSecurityOversizeAndDeeplyNestedBodies (issue 19): every operation of
// api/openapi.json that takes a body, called with a credential it accepts
// (the orchestrator's signature for the internal ones), answers a body over
// its limit (1 MiB; 7 MiB for the model route) 400 or 413, one over the
// gateway's (10 MiB) 413 payload_too_large, and
// bodies nested 1,000 deep, 100,000 deep (past the decoder's limit) and as
// 50,000 nested objects 400 or 413, in the envelope; operations without a
// body answer such bodies as they would none. Every answer is one the
// document gives the route, and the server answers throughout.
func TestSecurityOversizeAndDeeplyNestedBodies(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	s.putType(t, "sec-ws", map[string]any{"enabled": true, "tools": []string{"read"}})
	body := createBody("Hello")
	body["agent_type"] = "sec-ws"
	a, tokA, sbA := s.secReady(t, body, map[string]bool{})
	alive := func(t *testing.T, after string) {
		t.Helper()
		// The agent's sandbox (the test) keeps beating, as the server
		// keeps answering.
		if r := s.call(http.MethodPost, "/sandbox/"+a+"/heartbeat", sbA, map[string]any{}); r.status != http.StatusOK || r.body["stop"] != false {
			t.Fatalf("after %s the server answers a heartbeat %d %s", after, r.status, r.raw)
		}
		if r := s.alive(a, tokA); r.status != http.StatusOK || r.body["alive"] != true {
			t.Fatalf("after %s the server answers %d %s", after, r.status, r.raw)
		}
	}
	bodies := []struct {
		name string
		raw  []byte
		want []int
	}{
		{"1 MiB (over the route's limit)", secLarge(1 << 20), []int{400, 413}},
		{"7 MiB (over the model route's limit)", secLarge(7 << 20), []int{400, 413}},
		{"10 MiB and 1 KiB (over the gateway's)", secLarge(10<<20 + 1<<10), []int{413}},
		{"arrays nested 1,000 deep", secNested(1000, false), []int{400, 413}},
		{"arrays nested 100,000 deep", secNested(100_000, false), []int{400, 413}},
		{"objects nested 50,000 deep", secNested(50_000, true), []int{400, 413}},
	}
	orch := newOrchestrator(s)
	n := 0
	for _, op := range secOps(t) {
		class := secClass(t, op)
		t.Run(op.String(), func(t *testing.T) {
			for _, bd := range bodies {
				if !op.body && len(bd.raw) > 10<<20 {
					continue // a route without a body: the gateway's 413 is API Gateway's, undocumented per route
				}
				if model := strings.Contains(op.path, "/model/"); (len(bd.raw) == 7<<20+len(`{"text":""}`)) != model && len(bd.raw) > 1<<20 && len(bd.raw) < 10<<20 {
					continue // 1 MiB is over every route's limit but the model route's (6 MB)
				}
				path := secPath(t, op, a)
				h, q := http.Header{}, url.Values{}
				cred := ""
				if op.body {
					cred = secValid(class, tokA, sbA)
				}
				if cred != "" {
					secPlace(op.schemes[0], cred, h, q)
				}
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				req, err := http.NewRequestWithContext(ctx, op.method, s.srv.URL+path, bytes.NewReader(bd.raw))
				if err != nil {
					t.Fatal(err)
				}
				req.Header = h
				req.Header.Set("Content-Type", "application/json")
				if class == "internal" && op.body {
					for k, v := range orch.headers("sec-step") {
						req.Header.Set(k, v)
					}
					s.secSign(t, req, bd.raw)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", bd.name, err)
				}
				raw, _ := io.ReadAll(io.LimitReader(res.Body, secMaxRead))
				_ = res.Body.Close()
				cancel()
				n++
				r := secResp{status: res.StatusCode, raw: string(raw)}
				_ = json.Unmarshal(raw, &r.body)
				want := bd.want
				switch {
				case len(bd.raw) > 10<<20:
					// the gateway's limit, before any route
				case !op.body || cred == "" && class != "internal":
					want = []int{401, 403} // no credential it accepts: refused before the body
				case strings.HasSuffix(op.path, "/tools/{tool}") && len(bd.raw) < 1<<20:
					want = append(want, 404) // a tool the type does not enable is refused before the body
				}
				if !slices.Contains(want, r.status) {
					t.Errorf("%s: %d %.200s, want one of %v", bd.name, r.status, r.raw, want)
				}
				if !op.documents(r.status) {
					t.Errorf("%s: %d, which the document does not give for this route", bd.name, r.status)
				}
				if !strings.HasPrefix(op.path, "/embed/") && (r.code() == "" || (r.body["status"] != float64(r.status) && (!strings.HasPrefix(class, "e2b") || r.body["code"] != float64(r.status)))) {
					t.Errorf("%s: not the error envelope: %.200s", bd.name, r.raw)
				}
				if r.status == http.StatusBadRequest && len(bd.raw) > 1<<20 && !strings.Contains(r.str("message"), "larger than") {
					t.Errorf("%s: refused for something else than its size: %.200s", bd.name, r.raw)
				}
			}
			alive(t, op.String())
			t.Logf("checked: oversize and deeply nested bodies: 413 / 400 in the envelope, the server up")
		})
	}
	t.Logf("checked: %d requests; the server answered every one and still does", n)
}

// TestSecurityLogInjection (issue 19): CR, LF, ESC (ANSI colour, clear and
// title sequences), BEL, NUL and the JSON line separators U+2028/9, with a
// forged log record after a newline, in every string a request can give
// that the platform may log: ids and names in URLs and query strings, the
// fields of create, messages, env, attachments and agent types, the
// sandbox's events, states, uploads, gateway tool calls and its workspace
// warnings (which are logged, as an exception report), and raw request
// headers (User-Agent, tokens, Idempotency-Key, Origin). The dev server's
// log (the functions' slog JSON) must hold the input (escaped: the test
// reaches the log) and no raw CR/LF/ESC/BEL/NUL/U+2028 of it: every line is
// one JSON record, none of them forged. No answer carries them raw in a
// header either.
func TestSecurityLogInjection(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	const forged = `{"time":"2020-01-01T00:00:00Z","level":"ERROR","msg":"sec-forged-record"}`
	inj := "sec-inj\r\n" + forged + "\n\x1b[2J\x1b[31mred\x1b]0;title\x07\u2028\u2029\x00\r"
	enc := url.PathEscape(inj)
	skip := map[string]bool{}
	a, tokA, sbA := s.secReady(t, createBody("Hello "+inj), skip)

	// A session whose sandbox reports a degraded workspace: its warnings go
	// to the log as an exception report.
	created := make(chan reply, 1)
	go func() { created <- s.create(createBody("Hello")) }()
	w := s.firstSandboxExcept(t, skip)
	sbW := s.sandboxToken(t, w)
	spec := s.call(http.MethodGet, "/sandbox/"+w+"/spec", sbW, nil)
	hash, _ := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+w+"/status", sbW, map[string]any{"state": "ready", "guardrails_hash": hash,
		"workspace": map[string]any{"status": "degraded", "warnings": []string{inj, "clone of " + inj}}}); r.status != http.StatusOK {
		t.Fatalf("ready: %d %s", r.status, r.raw)
	}
	if r := <-created; r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}

	var answers []secResp
	do := func(method, path string, hdr http.Header, body any) {
		var raw []byte
		if body != nil {
			raw = secJSON(t, body)
		}
		answers = append(answers, s.secDo(t, method, path, hdr, raw))
	}
	// URLs: ids, names and query strings.
	for _, p := range []string{
		"/api/remote_agents/" + enc + "/alive", "/api/remote_agents/" + enc + "/events?token=" + url.QueryEscape(inj),
		"/api/remote_agents/" + a + "/events?token=" + url.QueryEscape(inj), "/embed/" + enc + "?token=" + url.QueryEscape(inj) + "&accent=" + url.QueryEscape(inj),
		"/api/remote_agents?state=" + url.QueryEscape(inj) + "&project_name=" + url.QueryEscape(inj) + "&cursor=" + url.QueryEscape(inj),
		agentTypes + "/" + enc, "/sandbox/" + enc + "/spec", "/api/remote_agents/" + a + "/alive%0d%0aSet-Cookie:%20sec-injected=1",
	} {
		hdr := secBearer(tokA)
		if strings.HasPrefix(p, agentTypes) || strings.HasPrefix(p, "/api/remote_agents?") {
			hdr = secBearer(appKey)
		}
		if strings.HasPrefix(p, "/sandbox/") {
			hdr = secBearer(sbA)
		}
		do(http.MethodGet, p, hdr, nil)
	}
	do(http.MethodPost, "/api/remote_agents/"+enc+"/messages", secBearer(tokA), map[string]any{"text": inj})
	do(http.MethodPost, "/proliferate/"+a+"/tools/"+enc, secBearer(sbA), map[string]any{"tool_call_id": "x", "args": map[string]any{}})
	do(http.MethodPost, "/api/remote_agents/"+a+"/workspace/tools/"+enc, secBearer(tokA), map[string]any{"args": map[string]any{}})
	do(http.MethodPost, "/sandbox/"+a+"/model/"+enc+"/"+enc, http.Header{"X-Api-Key": {sbA}}, map[string]any{"model": inj})
	// Bodies.
	for _, body := range []map[string]any{
		{"project_name": inj, "persona_slug": "assistant", "initial_prompt": "x"},
		{"project_name": "demo", "persona_slug": inj, "initial_prompt": "x"},
		{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "x", "agent_type": inj},
		{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "x", "task_context": map[string]any{"repository_url": "https://github.com/" + inj, "branch": inj}},
	} {
		do(http.MethodPost, "/api/remote_agents/create", secBearer(appKey), body)
	}
	do(http.MethodPost, "/api/remote_agents/"+a+"/messages", secBearer(tokA), map[string]any{"text": inj, "client_message_id": inj})
	do(http.MethodPost, "/api/remote_agents/"+a+"/messages", secBearer(tokA), map[string]any{"text": inj})
	do(http.MethodPost, "/api/remote_agents/"+a+"/env", secBearer(tokA), map[string]any{"values": map[string]any{inj: inj}})
	do(http.MethodPost, "/api/remote_agents/"+a+"/attachments", secBearer(tokA), map[string]any{"name": inj, "size_bytes": 1})
	do(http.MethodPost, agentTypes, secBearer(appKey), map[string]any{"id": "sec-inj", "name": inj, "description": inj})
	do(http.MethodPost, agentTypes, secBearer(appKey), map[string]any{"id": inj, "name": "x"})
	do(http.MethodPost, "/sandbox/"+a+"/events", secBearer(sbA), map[string]any{"events": []any{
		event("agent.message", map[string]any{"text": inj}), event("agent.error", map[string]any{"message": inj, "error": inj}),
		event("tool.call", map[string]any{"name": inj, "args": map[string]any{"x": inj}, "output": inj}),
	}})
	do(http.MethodPost, "/sandbox/"+a+"/events", secBearer(sbA), map[string]any{"id": inj, "events": []any{event(inj, nil)}})
	do(http.MethodPost, "/sandbox/"+a+"/status", secBearer(sbA), map[string]any{"state": inj, "reason": inj})
	do(http.MethodPost, "/sandbox/"+a+"/heartbeat", secBearer(sbA), map[string]any{"cpu_percent": 1, "note": inj})
	do(http.MethodPost, "/sandbox/"+a+"/uploads", secBearer(sbA), map[string]any{"tool": inj, "tool_call_id": inj, "files": []any{map[string]any{"path": inj, "size_bytes": 1}}})
	do(http.MethodPost, "/proliferate/"+a+"/tools/verify", secBearer(sbA), map[string]any{"tool_call_id": inj, "args": map[string]any{"folder": inj}})
	do(http.MethodPost, "/proliferate/"+a+"/tools/verify", secBearer(sbA), map[string]any{"tool_call_id": "sec-log-1", "args": map[string]any{"folder": inj}})
	do(http.MethodPost, "/proliferate/"+a+"/tools/request_env_variables", secBearer(sbA), map[string]any{"tool_call_id": "sec-log-2", "args": map[string]any{"keys": []any{map[string]any{"key": inj}}}})

	// Headers, raw: a client library would refuse to send them.
	rawHeaders := []string{"User-Agent: " + inj, "X-Session-Token: " + inj, "Idempotency-Key: " + inj, "Origin: " + inj, "Last-Event-ID: " + inj}
	for _, h := range rawHeaders {
		h = strings.NewReplacer("\r\n", "", "\n", "").Replace(h) // one header line, the rest of the bytes in it
		status := secRaw(t, s, "GET /api/remote_agents/"+a+"/alive HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tokA+"\r\n"+h+"\r\nConnection: close\r\n\r\n")
		if status != http.StatusBadRequest && status != http.StatusOK {
			t.Errorf("a header with control characters: %d", status)
		}
	}
	// A header line broken by a bare CR or LF, an injected header after it.
	for _, split := range []string{"\r", "\n"} {
		status := secRaw(t, s, "GET /api/remote_agents/"+a+"/alive HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tokA+"\r\nUser-Agent: a"+split+"X-Sec-Injected: 1\r\nConnection: close\r\n\r\n")
		t.Logf("checked: a header line split by %q: %d", split, status)
	}

	// The log: the input is there, escaped, and nothing of it raw.
	logs := s.logs.String()
	if !strings.Contains(logs, "sec-inj") {
		t.Fatalf("no injected string reached the log: the test proves nothing\n%s", logs)
	}
	for name, c := range map[string]string{"CR": "\r", "ESC": "\x1b", "BEL": "\x07", "NUL": "\x00", "U+2028": "\u2028", "U+2029": "\u2029"} {
		if strings.Contains(logs, c) {
			t.Errorf("the log holds a raw %s", name)
		}
	}
	lines := strings.Split(strings.TrimSuffix(logs, "\n"), "\n")
	reached := 0
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil || rec["time"] == nil || rec["level"] == nil {
			t.Errorf("log line %d is not one JSON record: %.300q", i, line)
			continue
		}
		if rec["msg"] == "sec-forged-record" || rec["time"] == "2020-01-01T00:00:00Z" {
			t.Errorf("log line %d is a forged record: %.300q", i, line)
		}
		if strings.Contains(line, "sec-inj") {
			reached++
		}
	}
	t.Logf("checked: %d log lines, %d holding the injected string (escaped); every line one JSON record, none forged, no raw CR/ESC/BEL/NUL/U+2028", len(lines), reached)

	// The answers: no header carries the input, none was injected.
	for i, r := range answers {
		for k, vs := range r.headers {
			if strings.EqualFold(k, "X-Sec-Injected") || (strings.EqualFold(k, "Set-Cookie") && strings.Contains(strings.Join(vs, ""), "sec-injected")) {
				t.Errorf("answer %d has an injected header %s", i, k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x1b\x00") {
					t.Errorf("answer %d: header %s carries control characters: %q", i, k, v)
				}
			}
		}
		if strings.ContainsAny(r.raw, "\x1b\x00\x07") && r.headers.Get("Content-Type") == "application/json" {
			t.Errorf("answer %d carries raw control characters in its JSON: %.200q", i, r.raw)
		}
	}
	t.Logf("checked: %d answers: no header injected or carrying CR/LF/ESC/NUL", len(answers))
}

// secRaw sends a raw HTTP/1.1 request and returns the status of its answer.
func secRaw(t *testing.T, s *stack, request string) int {
	t.Helper()
	u, err := url.Parse(s.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(t.Context(), "tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	_ = res.Body.Close()
	for k, vs := range res.Header {
		if strings.EqualFold(k, "X-Sec-Injected") {
			t.Errorf("the answer has the injected header %s: %v", k, vs)
		}
	}
	return res.StatusCode
}

// TestSecurityWorkspaceToolsStayInTheWorkspace (issue 19): a real agent
// (the agent binary, in its sandbox, under its default policy) runs the file
// tools an app or its model asks for through POST …/workspace/tools/{tool}:
// every way out of its workspace is refused, by the policy ("denied by
// policy"), and nothing outside is read or written: .. (plain, after a
// folder, many), absolute paths, ~, another sandbox's folder, NUL bytes,
// percent-encoding (a plain name), symlinks the agent's own bash makes (to
// the parent, to a file outside, a dangling one whose target would be made
// outside), git paths; denied commands smuggled past bash's rules (a path to
// sudo, sudo in bash -ec, eval, su); and the sandbox's secrets are not in
// what its commands see (env, /proc/self/environ, the agent's
// /proc/<pid>/environ). Tool names in the URL that are spelled as a way out
// are 404. TestNothingSecretInTheToolsReach holds the rest of the secrets'
// case.
func TestSecurityWorkspaceToolsStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	env := []string{"RA_NO_TMUX=1"}
	asRoot := os.Geteuid() == 0
	if asRoot {
		// As the image's task does: the agent is root, its tools another user.
		env = append(env, "RA_TOOL_USER=nobody")
	}
	s := start(t, withSandboxEnv(env...), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	if asRoot {
		for _, dir := range []string{s.work, filepath.Dir(s.work)} {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.putType(t, "sec-tools", map[string]any{"enabled": true, "tools": everyTool()})
	id, tok := s.createTyped(t, "sec-tools")
	ws := s.workspaceOf(id)
	const secret, neighbour = "SEC-OUTSIDE-SECRET-41c9", "SEC-NEIGHBOUR-SECRET-0b7e"
	outside := filepath.Join(s.work, "outside-secret.txt")
	other := filepath.Join(s.work, "sandboxes", "neighbour-1")
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "secret.txt"), []byte(neighbour+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	relOutside, err := filepath.Rel(ws, outside)
	if err != nil {
		t.Fatal(err)
	}
	run := func(tool string, args map[string]any) secResp {
		t.Helper()
		r := s.secDo(t, http.MethodPost, "/api/remote_agents/"+id+"/workspace/tools/"+tool, secBearer(tok), secJSON(t, map[string]any{"args": args}))
		if r.status != http.StatusOK {
			t.Fatalf("%s %v: %d %.300s", tool, args, r.status, r.raw)
		}
		return r
	}
	refused := func(what, tool string, args map[string]any, why string) {
		t.Helper()
		r := run(tool, args)
		out := r.str("output")
		if r.body["is_error"] != true || !strings.Contains(out, why) {
			t.Errorf("%s: %s %v answered %.300q, want a refusal (%s)", what, tool, args, out, why)
		}
		if strings.Contains(out, secret) || strings.Contains(out, neighbour) {
			t.Errorf("%s: the output holds data from outside the workspace: %.300q", what, out)
		}
	}
	const denied = "denied by policy"

	// Bash makes links out of the workspace for the file tools to follow.
	if r := run("bash", map[string]any{"command": "ln -s .. up && ln -s " + outside + " secret-link && ln -s " + filepath.Join(s.work, "planted.txt") + " dangling && ls -l"}); r.body["is_error"] != false {
		t.Fatalf("bash ln: %.300s", r.raw)
	}
	for _, tc := range []struct {
		what, tool string
		args       map[string]any
	}{
		{"dot-dot", "read", map[string]any{"path": relOutside}},
		{"dot-dot after a folder", "read", map[string]any{"path": "src/../" + relOutside}},
		{"many dot-dots", "read", map[string]any{"path": strings.Repeat("../", 30) + "etc/passwd"}},
		{"an absolute path", "read", map[string]any{"path": outside}},
		{"another sandbox's folder", "read", map[string]any{"path": "../neighbour-1/secret.txt"}},
		{"home", "read", map[string]any{"path": "~/.ssh/id_rsa"}},
		{"/proc", "read", map[string]any{"path": "/proc/self/environ"}},
		{"a NUL byte", "read", map[string]any{"path": "README.md\x00/../" + relOutside}},
		{"a link to the parent", "read", map[string]any{"path": "up/outside-secret.txt"}},
		{"a link to a file outside", "read", map[string]any{"path": "secret-link"}},
		{"grep through a link", "grep", map[string]any{"pattern": "SEC-", "path": "up"}},
		{"grep outside", "grep", map[string]any{"pattern": "SEC-", "path": "/"}},
		{"ls outside", "ls", map[string]any{"path": ".."}},
		{"ls another sandbox", "ls", map[string]any{"path": "../neighbour-1"}},
		{"write outside", "write", map[string]any{"path": "../../escape.txt", "content": "x"}},
		{"write absolute", "write", map[string]any{"path": filepath.Join(s.work, "escape-abs.txt"), "content": "x"}},
		{"write through a link", "write", map[string]any{"path": "up/escape-link.txt", "content": "x"}},
		{"write through a dangling link", "write", map[string]any{"path": "dangling", "content": "x"}},
		{"edit outside", "edit", map[string]any{"path": relOutside, "old": "SEC", "new": "PWNED"}},
		{"git add outside", "git", map[string]any{"subcommand": "add", "args": []string{"--", relOutside}}},
	} {
		refused(tc.what, tc.tool, tc.args, denied)
	}
	// A percent-encoded path is a name, never decoded: no such file here.
	refused("percent-encoding", "read", map[string]any{"path": "%2e%2e/%2e%2e/outside-secret.txt"}, "does not exist")
	if r := run("glob", map[string]any{"pattern": "../**"}); strings.Contains(r.str("output"), "outside-secret") || strings.Contains(r.str("output"), "neighbour") {
		t.Errorf("glob listed files outside: %.300q", r.str("output"))
	}
	for _, f := range []string{filepath.Join(s.work, "escape.txt"), filepath.Join(s.work, "escape-abs.txt"), filepath.Join(s.work, "escape-link.txt"), filepath.Join(s.work, "planted.txt")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was written outside the workspace", f)
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != secret+"\n" {
		t.Errorf("the file outside was changed: %q", got)
	}
	t.Logf("checked: file tools refuse .., absolute, ~, /proc, NUL, another sandbox, links made by bash (parent, file, dangling) and git paths out of the workspace; nothing outside read or written")

	// Commands bash's rules deny, smuggled.
	for _, cmd := range []string{"/usr/bin/sudo id", "bash -ec 'sudo id'", "eval 'sudo id'", "if true; then sudo id; fi", "su", "/bin/su -c id"} {
		refused("smuggled "+cmd, "bash", map[string]any{"command": cmd}, denied)
	}
	t.Logf("checked: denied commands behind a path, bash -ec, eval, if/then are refused")

	// Nothing of the sandbox's secrets in what its commands see.
	r := run("bash", map[string]any{"command": `env; tr '\0' '\n' < /proc/self/environ; cat /proc/$PPID/environ 2>&1; echo "agent-environ-exit=$?"`})
	out := r.str("output")
	for _, leak := range []string{"RA_BOOTSTRAP_CODE", "rsb_", "rbc_", "PROLIFERATE_", "AWS_", "SANDBOX_MCP_AUTH_TOKEN", "RA_MODEL"} {
		if strings.Contains(out, leak) {
			t.Errorf("a command sees %s:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "WORKSPACE=") || strings.Contains(out, "agent-environ-exit=0") {
		t.Errorf("env printed %.500q: want the scrubbed environment, and the agent's own out of reach", out)
	}
	t.Logf("checked: env, /proc/self/environ and the agent's /proc/<pid>/environ show no token, code or platform variable")

	// Tool names in the URL spelled as a way out.
	for _, name := range []string{"..%2fbash", "%2e%2e", "read%00", "..", "bash%2f..%2fread"} {
		r := s.secDo(t, http.MethodPost, "/api/remote_agents/"+id+"/workspace/tools/"+name, secBearer(tok), []byte(`{"args":{"path":"README.md"}}`))
		if r.status != http.StatusNotFound {
			t.Errorf("tool %q: %d %.200s, want 404", name, r.status, r.raw)
		}
	}
	t.Logf("checked: tool names spelled as paths are 404")
}
