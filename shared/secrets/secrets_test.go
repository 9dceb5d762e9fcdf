package secrets_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/secrets/secretstest"
)

func TestMemory(t *testing.T) {
	secretstest.Run(t, func(*testing.T) secrets.Store { return secrets.NewMemory() })
}

var app = registry.AppKey{ID: "k1", Tenant: "t1"}

func TestService(t *testing.T) {
	svc := secrets.New(secrets.NewMemory(), func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) })
	ctx := t.Context()
	rule := []secrets.Rule{{Host: "API.example.com", PathPrefix: "/v1/", Header: "Authorization", Format: "Bearer {{value}}"}}
	s, err := svc.Create(ctx, app, secrets.Request{Name: "api", Value: "s3cret", Inject: rule})
	if err != nil || s.Inject[0].Host != "api.example.com" {
		t.Fatalf("Create = %+v, %v", s, err)
	}
	if _, err := svc.Create(ctx, app, secrets.Request{Name: "api", Value: "x", Inject: rule}); apierror.CodeOf(err) != apierror.SecretExists {
		t.Errorf("second create: %v", err)
	}
	if _, err := svc.Put(ctx, app, "nope", secrets.Request{Value: "x", Inject: rule}); apierror.CodeOf(err) != apierror.SecretNotFound {
		t.Errorf("put of none: %v", err)
	}
	if _, err := svc.Put(ctx, app, "api", secrets.Request{Value: "rotated", Inject: rule}); err != nil {
		t.Fatal(err)
	}
	in, err := svc.Injections(ctx, "t1", "", []string{"api", "missing"})
	if err != nil || len(in) != 1 || in[0] != (secrets.Header{Host: "api.example.com", PathPrefix: "/v1/", Name: "Authorization", Value: "Bearer rotated"}) {
		t.Errorf("Injections = %+v, %v", in, err)
	}
	if in, _ := svc.Injections(ctx, "t2", "", []string{"api"}); len(in) != 0 {
		t.Errorf("another tenant's injections: %+v", in)
	}
	for name, req := range map[string]secrets.Request{
		"bad name":       {Name: "../x", Value: "v", Inject: rule},
		"no value":       {Name: "a", Inject: rule},
		"newline value":  {Name: "a", Value: "v\r\nX-Evil: 1", Inject: rule},
		"no rules":       {Name: "a", Value: "v"},
		"url host":       {Name: "a", Value: "v", Inject: []secrets.Rule{{Host: "https://x.example.com", Header: "A", Format: "{{value}}"}}},
		"host header":    {Name: "a", Value: "v", Inject: []secrets.Rule{{Host: "x.example.com", Header: "Host", Format: "{{value}}"}}},
		"proxy header":   {Name: "a", Value: "v", Inject: []secrets.Rule{{Host: "x.example.com", Header: "Proxy-Authorization", Format: "{{value}}"}}},
		"no placeholder": {Name: "a", Value: "v", Inject: []secrets.Rule{{Host: "x.example.com", Header: "A", Format: "Bearer"}}},
		"bad prefix":     {Name: "a", Value: "v", Inject: []secrets.Rule{{Host: "x.example.com", PathPrefix: "v1", Header: "A", Format: "{{value}}"}}},
	} {
		if _, err := svc.Create(ctx, app, req); apierror.CodeOf(err) != apierror.InvalidRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
	list, err := svc.List(ctx, app, "")
	if err != nil || len(list.Secrets) != 1 || strings.Contains(strings.ToLower(jsonOf(t, list)), "rotated") {
		t.Errorf("List = %+v, %v", list, err)
	}
	if err := svc.Delete(ctx, app, "api", ""); err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, app, "api", ""); apierror.CodeOf(err) != apierror.SecretNotFound {
		t.Errorf("second delete: %v", err)
	}
}

// An app's user's secret goes with the agents created for that user,
// before the app's own of the name; another user's agents carry the app's.
func TestEndUsersSecrets(t *testing.T) {
	svc := secrets.New(secrets.NewMemory(), nil)
	ctx := t.Context()
	rule := []secrets.Rule{{Host: "github.com", Header: "Authorization", Format: "{{basic:x-access-token}}"}}
	if _, err := svc.Create(ctx, app, secrets.Request{Name: "github", Value: "app-token", Inject: rule}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, app, secrets.Request{Name: "github", EndUser: "alice@example.com", Value: "alice-token", Inject: rule}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, app, secrets.Request{Name: "github", EndUser: "../bob", Value: "x", Inject: rule}); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("a bad end_user: %v", err)
	}
	for user, want := range map[string]string{"alice@example.com": "alice-token", "carol": "app-token", "": "app-token"} {
		in, err := svc.Injections(ctx, "t1", user, []string{"github"})
		if err != nil || len(in) != 1 || in[0].Value != secrets.Render("{{basic:x-access-token}}", want) {
			t.Errorf("%q's agents carry %+v, %v; want %s's", user, in, err, want)
		}
	}
	own, _ := svc.List(ctx, app, "")
	alices, _ := svc.List(ctx, app, "alice@example.com")
	if len(own.Secrets) != 1 || own.Secrets[0].EndUser != "" || len(alices.Secrets) != 1 || alices.Secrets[0].EndUser != "alice@example.com" {
		t.Errorf("lists: the app's %+v, alice's %+v", own, alices)
	}
	if err := svc.Delete(ctx, app, "github", "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if in, _ := svc.Injections(ctx, "t1", "alice@example.com", []string{"github"}); len(in) != 1 || in[0].Value != secrets.Render("{{basic:x-access-token}}", "app-token") {
		t.Errorf("after alice's is deleted: %+v", in)
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"Bearer {{value}}", "Bearer tok"},
		{"{{value}}", "tok"},
		{"{{basic:x-access-token}}", "Basic eC1hY2Nlc3MtdG9rZW46dG9r"},
	} {
		if got := secrets.Render(tc.format, "tok"); got != tc.want {
			t.Errorf("Render(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
