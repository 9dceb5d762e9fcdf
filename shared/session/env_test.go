package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// envStack is the inbox and the sandbox channel over DynamoDB Local
// and gofakes3, with one configuration.
type envStack struct {
	svc    *session.Inbox
	ch     *sandboxchannel.Service
	store  *dynamo.Sessions
	bucket *s3blob.Store
	ddb    *dynamodb.Client
	tables []string
	cfg    string
}

func newEnvStack(t *testing.T) *envStack {
	t.Helper()
	set, _ := awstest.Resources(t)
	cfg := awstest.Config(t)
	ddb := awsconfig.NewDynamoDB(cfg)
	e := &envStack{
		store:  dynamo.NewSessions(ddb, set.Sessions.Name, set.Idempotency.Name, set.Events.Name),
		bucket: s3blob.New(awsconfig.NewS3(cfg), set.Bucket.Name),
		ddb:    ddb,
		tables: []string{set.Sessions.Name, set.Idempotency.Name, set.Events.Name, set.Registry.Name},
		cfg:    "cfg-" + uuid.NewString()[:8],
	}
	reg := dynamo.NewRegistry(ddb, set.Registry.Name)
	if err := reg.PutPersona(t.Context(), registry.Persona{Slug: "helper", Name: "Helper", Skill: "Helps.", Active: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []registry.Configuration{
		{Tenant: tenant, ID: e.cfg}, {Tenant: tenant, ID: e.cfg + "-other"},
		{Tenant: otherTenant, ID: e.cfg}, // the same id, another tenant's
	} {
		c.RepoName = "acme/web"
		if err := reg.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	rules := filepath.Join(t.TempDir(), "guardrails.md")
	if err := os.WriteFile(rules, []byte("# Rules\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.svc = session.NewInbox(session.InboxOptions{Store: e.store, Blob: e.bucket, Secrets: e.bucket})
	e.ch = sandboxchannel.New(sandboxchannel.Options{Store: e.store, Registry: reg, Guardrails: guardrails.File(rules), Blob: e.bucket, Secrets: e.bucket})
	return e
}

// The tenant of envStack's sessions, and another with a configuration of the
// same id.
const (
	tenant      = "acme"
	otherTenant = "zeta"
)

// add writes a session of tenant's configuration cfg ("" for scratch) in
// state, and returns it with its session token and its sandbox's token.
func (e *envStack) add(t *testing.T, state session.State, cfg string) (session.Session, string, string) {
	t.Helper()
	return e.addFor(t, tenant, state, cfg)
}

// addFor is add for a session of tenant ten.
func (e *envStack) addFor(t *testing.T, ten string, state session.State, cfg string) (session.Session, string, string) {
	t.Helper()
	tok, hash := token.New(token.Session)
	sbx, sbxHash := token.New(token.Sandbox)
	now := time.Now().UTC()
	s := session.Session{
		ID: uuid.NewString(), Blueprint: session.Blueprint{
			PersonaSlug:     "helper",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-test",
			ConfigurationID: cfg,
		},
		State: state, Generation: 1,
		TokenHashes: []string{hash}, SandboxTokenHash: sbxHash, Tenant: ten,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := e.store.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	return s, tok, sbx
}

// submit submits in as the holder of session id's token tok would: authorized
// first, as the route does.
func (e *envStack) submit(ctx context.Context, id, tok string, in session.EnvSubmission) (session.EnvReceipt, error) {
	sess, err := e.svc.Authorize(ctx, id, tok)
	if err != nil {
		return session.EnvReceipt{}, err
	}
	return e.svc.SubmitEnv(ctx, sess, in)
}

// persisted reads the configuration's sealed env document.
func (e *envStack) persisted(t *testing.T, cfg string) map[string]string {
	t.Helper()
	raw, _, err := e.bucket.ReadSealed(t.Context(), session.ConfigurationEnvKey(tenant, cfg), session.MaxConfigurationEnvBytes)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// everything is every item of the stack's tables, as text.
func (e *envStack) everything(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, name := range e.tables {
		out, err := e.ddb.Scan(t.Context(), &dynamodb.ScanInput{TableName: &name})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v\n", out.Items)
	}
	return b.String()
}

func yes() *bool { v := true; return &v }
func no() *bool  { v := false; return &v }

// Each key persists by its own persist, the keys that do not say by
// saveToConfiguration; persisted values are sealed under the configuration,
// merged over what earlier submissions kept, and served in the spec of every
// later session of that configuration only. Events name keys, never values.
func TestSubmitEnvPersistsForTheConfiguration(t *testing.T) {
	t.Parallel()
	e := newEnvStack(t)
	ctx := t.Context()
	s1, tok, _ := e.add(t, session.Working, e.cfg)

	got, err := e.submit(ctx, s1.ID, tok, session.EnvSubmission{
		Values:              map[string]string{"D": "d-secret-1"},
		Secrets:             []session.EnvSecret{{Key: "A", Value: "a-secret-1", Persist: yes()}, {Key: "B", Value: "b-secret-1", Persist: no()}, {Key: "C", Value: "c-secret-1"}},
		SaveToConfiguration: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Keys, []string{"A", "B", "C", "D"}) || !slices.Equal(got.Persisted, []string{"A", "C", "D"}) {
		t.Errorf("receipt %+v", got)
	}
	if m := e.persisted(t, e.cfg); !maps.Equal(m, map[string]string{"A": "a-secret-1", "C": "c-secret-1", "D": "d-secret-1"}) {
		t.Errorf("persisted %v", m)
	}

	// Without saveToConfiguration, keys that do not say stay with the session.
	if got, err := e.submit(ctx, s1.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "A", Value: "a-secret-2"}}}); err != nil || len(got.Persisted) != 0 {
		t.Errorf("not persisted: %+v %v", got, err)
	}
	if m := e.persisted(t, e.cfg); m["A"] != "a-secret-1" {
		t.Errorf("a value not persisted replaced a kept one: %v", m)
	}
	// A key that says so replaces the kept value; the others stay.
	if _, err := e.submit(ctx, s1.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "A", Value: "a-secret-3", Persist: yes()}}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "a-secret-3", "C": "c-secret-1", "D": "d-secret-1"}
	if m := e.persisted(t, e.cfg); !maps.Equal(m, want) {
		t.Errorf("merged %v, want %v", m, want)
	}

	// A later session of the configuration gets them in its spec; a session of
	// another configuration, of another tenant's configuration of the same id,
	// or of none, does not.
	s2, _, sbx2 := e.add(t, session.Provisioning, e.cfg)
	if spec, err := e.ch.Spec(ctx, s2.ID, sbx2); err != nil || !maps.Equal(spec.Env, want) {
		t.Errorf("spec of a later session: %v %v", spec.Env, err)
	}
	s3, _, sbx3 := e.add(t, session.Provisioning, e.cfg+"-other")
	if spec, err := e.ch.Spec(ctx, s3.ID, sbx3); err != nil || len(spec.Env) != 0 {
		t.Errorf("spec of another configuration's session: %v %v", spec.Env, err)
	}
	s5, _, sbx5 := e.addFor(t, otherTenant, session.Provisioning, e.cfg)
	if spec, err := e.ch.Spec(ctx, s5.ID, sbx5); err != nil || len(spec.Env) != 0 {
		t.Errorf("spec of another tenant's session of a configuration of the same id: %v %v", spec.Env, err)
	}
	s4, _, sbx4 := e.add(t, session.Provisioning, "")
	if spec, err := e.ch.Spec(ctx, s4.ID, sbx4); err != nil || spec.Env != nil {
		t.Errorf("spec of a scratch session: %v %v", spec.Env, err)
	}

	// The events say which keys were sent and kept; no table holds a value.
	evs, err := e.store.Events(ctx, s1.ID, 1, 10) // after agent.created
	if err != nil || len(evs) != 3 {
		t.Fatalf("events %+v %v", evs, err)
	}
	var first sandboxwire.EnvSubmitted
	if err := sandboxwire.Decode(evs[0].Data, &first); err != nil || !slices.Equal(first.Keys, []string{"A", "B", "C", "D"}) || !slices.Equal(first.Persisted, []string{"A", "C", "D"}) {
		t.Errorf("first env.submitted %+v %v", first, err)
	}
	if all := e.everything(t); strings.Contains(all, "-secret-") {
		t.Errorf("a submitted value is in a table:\n%s", all)
	}
}

// Concurrent submissions persisting to one configuration lose nothing.
func TestSubmitEnvConcurrentPersistsMerge(t *testing.T) {
	t.Parallel()
	e := newEnvStack(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		s, tok, _ := e.add(t, session.Working, e.cfg)
		wg.Go(func() {
			_, errs[i] = e.submit(t.Context(), s.ID, tok, session.EnvSubmission{
				Values: map[string]string{fmt.Sprintf("K%d", i): "v"}, SaveToConfiguration: true,
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("submission %d: %v", i, err)
		}
	}
	if m := e.persisted(t, e.cfg); len(m) != n {
		t.Errorf("persisted %v, want %d keys", m, n)
	}
}

// Bad submissions are invalid_request, before anything is stored.
func TestSubmitEnvRefusesBadSubmissions(t *testing.T) {
	t.Parallel()
	e := newEnvStack(t)
	ctx := t.Context()
	withCfg, tok, _ := e.add(t, session.Working, e.cfg)
	scratch, scratchTok, _ := e.add(t, session.Working, "")
	many := map[string]string{}
	for i := range session.MaxEnvKeys + 1 {
		many[fmt.Sprintf("K%d", i)] = "v"
	}
	tests := []struct {
		name string
		id   string
		tok  string
		in   session.EnvSubmission
	}{
		{"nothing", withCfg.ID, tok, session.EnvSubmission{SaveToConfiguration: true}},
		{"too many keys", withCfg.ID, tok, session.EnvSubmission{Values: many}},
		{"a secret without a key", withCfg.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Value: "v"}}}},
		{"a bad name", withCfg.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "NOT A KEY", Value: "v"}}}},
		{"a value too large", withCfg.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "A", Value: strings.Repeat("x", session.MaxEnvValueBytes+1)}}}},
		{"a key twice", withCfg.ID, tok, session.EnvSubmission{Values: map[string]string{"A": "1"}, Secrets: []session.EnvSecret{{Key: "A", Value: "2"}}}},
		{"a secret twice", withCfg.ID, tok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "A", Value: "1"}, {Key: "A", Value: "2"}}}},
		{"persist without a configuration", scratch.ID, scratchTok, session.EnvSubmission{Secrets: []session.EnvSecret{{Key: "A", Value: "1", Persist: yes()}}}},
		{"saveToConfiguration without a configuration", scratch.ID, scratchTok, session.EnvSubmission{Values: map[string]string{"A": "1"}, SaveToConfiguration: true}},
	}
	for _, tt := range tests {
		if _, err := e.submit(ctx, tt.id, tt.tok, tt.in); apierror.CodeOf(err) != apierror.InvalidRequest {
			t.Errorf("%s: %v, want invalid_request", tt.name, err)
		}
	}
	for _, s := range []session.Session{withCfg, scratch} {
		if evs, _ := e.store.Events(ctx, s.ID, 1, 10); len(evs) != 0 { // after agent.created
			t.Errorf("a refused submission left events: %+v", evs)
		}
	}
	if _, _, err := e.bucket.ReadSealed(ctx, session.ConfigurationEnvKey(tenant, e.cfg), 1<<20); err == nil {
		t.Error("a refused submission persisted values")
	}
	// A key that says no needs no configuration, whatever the fallback says.
	if got, err := e.submit(ctx, scratch.ID, scratchTok, session.EnvSubmission{
		Secrets: []session.EnvSecret{{Key: "A", Value: "1", Persist: no()}}, SaveToConfiguration: true,
	}); err != nil || len(got.Persisted) != 0 {
		t.Errorf("persist false in a scratch session: %+v %v", got, err)
	}
}

// A configuration keeps at most MaxConfigurationEnvKeys values: a submission
// that would pass it is refused, and what was kept stays.
func TestSubmitEnvBoundsAConfiguration(t *testing.T) {
	t.Parallel()
	e := newEnvStack(t)
	s, tok, _ := e.add(t, session.Working, e.cfg)
	batch := func(from int) session.EnvSubmission {
		in := session.EnvSubmission{Values: map[string]string{}, SaveToConfiguration: true}
		for i := from; i < from+session.MaxEnvKeys; i++ {
			in.Values[fmt.Sprintf("K%03d", i)] = "v"
		}
		return in
	}
	for from := 0; from < session.MaxConfigurationEnvKeys; from += session.MaxEnvKeys {
		if _, err := e.submit(t.Context(), s.ID, tok, batch(from)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.submit(t.Context(), s.ID, tok, batch(session.MaxConfigurationEnvKeys)); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("one batch too many: %v, want invalid_request", err)
	}
	if m := e.persisted(t, e.cfg); len(m) != session.MaxConfigurationEnvKeys {
		t.Errorf("%d kept, want %d", len(m), session.MaxConfigurationEnvKeys)
	}
}
