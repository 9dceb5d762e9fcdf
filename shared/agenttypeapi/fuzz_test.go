package agenttypeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/agenttypeapi"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/registry"
)

var defaults = registry.ResourceLimits{CPU: "1", Memory: "2G", Disk: "20G"}

// auth knows every app key, of one tenant.
type auth struct{}

func (auth) Authenticate(context.Context, string) (registry.AppKey, error) {
	return registry.AppKey{ID: "key", Tenant: "tenant"}, nil
}

// types is a registry with the tenant's type "mine", recording what is
// stored.
type types struct {
	registry.AgentTypes // only the methods below are called
	created             *registry.AgentType
	set                 *registry.WorkspaceConfig
}

func (r *types) CreateAgentType(_ context.Context, t registry.AgentType) error {
	r.created = &t
	return nil
}

func (r *types) AgentType(_ context.Context, tenant, id string) (registry.AgentType, error) {
	if id != "mine" {
		return registry.AgentType{}, registry.ErrNotFound
	}
	return registry.AgentType{ID: id, Name: "Mine", Tenant: tenant}, nil
}

func (r *types) SetWorkspaceConfig(_ context.Context, _, _ string, c registry.WorkspaceConfig, _ time.Time) error {
	r.set = &c
	return nil
}

func handlers() (*agenttypeapi.Handlers, *types) {
	reg := &types{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &agenttypeapi.Handlers{Auth: auth{}, Types: agenttype.New(agenttype.Options{Registry: reg, Defaults: defaults, Now: func() time.Time { return now }}),
		Log: slog.New(slog.DiscardHandler)}, reg
}

var seeds = []string{
	`{"enabled":true,"repo_source":{"type":"fixed","url":"https://github.com/org/repo","branch":"main"},"tools":["bash","read","bash"],` +
		`"resource_limits":{"cpu":"2","memory":"4G","disk":"40G"},"checkout_on_start":true,"base_image":"public.ecr.aws/docker/library/node:22",` +
		`"setup_commands":["npm ci"],"setup_timeout_seconds":600,"warm_pool_size":2,"session_limits":{"max_session_seconds":3600,"max_tokens":1000,"max_cost_usd":1.5}}`,
	`{"enabled":true,"repo_source":{"type":"task_context"},"tools":["ssh"]}`,
	`{"repo_source":{"type":"fixed","url":"http://bob:pw@127.0.0.1/app.git"}}`,
	`{"resource_limits":{"cpu":"0.25","memory":"512M"},"setup_commands":[" "],"setup_timeout_seconds":-1}`,
	`{"session_limits":{"max_cost_usd":1e309}}`,
	`{}`,
}

// checkStored checks what the registry was given: Validate takes it back
// unchanged, also once through JSON (what is stored reads back as valid).
func checkStored(t *testing.T, c registry.WorkspaceConfig) {
	t.Helper()
	again, err := agenttype.Validate(c, defaults)
	if err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("stored %+v; validated again: %+v, %v", c, again, err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var read registry.WorkspaceConfig
	if err := json.Unmarshal(raw, &read); err != nil {
		t.Fatalf("stored %s does not read back: %v", raw, err)
	}
	if again, err := agenttype.Validate(read, defaults); err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("stored %s reads back as %+v, %v", raw, again, err)
	}
}

// POST /api/v1/agent-types: any body. It is refused (400, nothing stored)
// or stored as the type it names (201), its configuration one that
// validates to itself; the same value encoded back to JSON gets the same
// answer.
func FuzzCreate(f *testing.F) {
	for _, s := range seeds {
		f.Add(`{"id":"web-1","name":"Web","workspace_config":` + s + `}`)
	}
	f.Add(`{"id":"Web","name":"\u0007"}`)
	f.Add(`{"id":"web","name":"Web"}`)
	f.Fuzz(func(t *testing.T, body string) {
		h, reg := handlers()
		req := httpapi.Request{Headers: map[string]string{"authorization": "Bearer rak_x"}, Body: body}
		res, err := h.Create(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var in agenttype.CreateRequest
		derr := httpapi.DecodeJSON(req, agenttypeapi.MaxBodyBytes, &in)
		if res.StatusCode != 201 {
			env := httpapitest.Envelope(t, res)
			if env.ErrorCode != refusedAs(derr) || reg.created != nil || (derr != nil && env.Message != httpapi.EnvelopeOf(derr).Message) {
				t.Fatalf("answered %+v (stored %+v); decode: %v", env, reg.created, derr)
			}
		} else {
			var view agenttype.View
			if err := json.Unmarshal([]byte(res.Body), &view); err != nil || derr != nil || reg.created == nil {
				t.Fatalf("201 %s (%v), decode %v, stored %+v", res.Body, err, derr, reg.created)
			}
			c := reg.created
			if c.ID != in.ID || !agenttype.ValidID(c.ID) || c.Name != in.Name || strings.TrimSpace(c.Name) == "" || c.Tenant != "tenant" ||
				view.ID != c.ID || view.Name != c.Name || view.Platform || !reflect.DeepEqual(view.WorkspaceConfig, c.Workspace) {
				t.Fatalf("stored %+v, answered %+v, for %+v", c, view, in)
			}
			checkStored(t, c.Workspace)
		}
		if derr != nil {
			return
		}
		raw, _ := json.Marshal(in)
		h, _ = handlers()
		req.Body = string(raw)
		if len(raw) > agenttypeapi.MaxBodyBytes {
			return
		}
		again, err := h.Create(t.Context(), req)
		if err != nil || again.StatusCode != res.StatusCode || (res.StatusCode != 201 && again.Body != res.Body) {
			t.Fatalf("re-encoded as %s: %d %s, was %d %s", raw, again.StatusCode, again.Body, res.StatusCode, res.Body)
		}
	})
}

// PUT /api/v1/agent-types/{id}/workspace-config: any body. It is refused
// (400, nothing stored) or stored (200), what is answered being what is
// stored, a configuration that validates to itself.
func FuzzPutWorkspaceConfig(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, body string) {
		h, reg := handlers()
		req := httpapi.Request{Headers: map[string]string{"authorization": "Bearer rak_x"}, Body: body, PathParameters: map[string]string{"id": "mine"}}
		res, err := h.PutWorkspaceConfig(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var in registry.WorkspaceConfig
		derr := httpapi.DecodeJSON(req, agenttypeapi.MaxBodyBytes, &in)
		if res.StatusCode != 200 {
			env := httpapitest.Envelope(t, res)
			if env.ErrorCode != refusedAs(derr) || reg.set != nil || (derr != nil && env.Message != httpapi.EnvelopeOf(derr).Message) {
				t.Fatalf("answered %+v (stored %+v); decode: %v", env, reg.set, derr)
			}
			return
		}
		var out registry.WorkspaceConfig
		dec := json.NewDecoder(bytes.NewReader([]byte(res.Body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil || derr != nil || reg.set == nil || !reflect.DeepEqual(out, *reg.set) {
			t.Fatalf("200 %s (%v), decode %v, stored %+v", res.Body, err, derr, reg.set)
		}
		if in.Enabled != out.Enabled || in.Checkout() != out.Checkout() || in.WarmPoolSize != out.WarmPoolSize || in.BaseImage != out.BaseImage {
			t.Fatalf("stored %+v for %+v", out, in)
		}
		checkStored(t, out)
	})
}

// refusedAs is the code a refused body is answered: DecodeJSON's (too
// large, not JSON), or invalid_request for one the service refuses.
func refusedAs(decodeErr error) apierror.Code {
	if decodeErr != nil {
		return apierror.CodeOf(decodeErr)
	}
	return apierror.InvalidRequest
}
