package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/job"
)

const (
	u1 = "11111111-1111-4111-8111-111111111111"
	u2 = "22222222-2222-4222-8222-222222222222"
)

func body(extra string) string {
	return `{"commandId":"` + u1 + `","planStepId":"` + u2 + `","agentId":"` + u1 + `","identityId":"` + u2 + `","contextId":"` + u1 +
		`","tokenLimit":10,"inputData":{"a":1}` + extra + `}`
}

func TestParseCreate(t *testing.T) {
	tests := []struct {
		name, in, want string // want: a fragment of the message, "" valid
	}{
		{"valid", body(""), ""},
		{"constraints", body(`,"constraints":{"timeout":60,"memory":512,"network":true}`), ""},
		{"unknown field", body(`,"priority":1`), "unknown field"},
		{"unknown constraint", body(`,"constraints":{"cpu":1}`), "unknown field"},
		{"two objects", body("") + "{}", "one JSON object"},
		{"token limit 0", strings.Replace(body(""), `"tokenLimit":10`, `"tokenLimit":0`, 1), "tokenLimit"},
		{"token limit fraction", strings.Replace(body(""), `"tokenLimit":10`, `"tokenLimit":1.5`, 1), "wrong type"},
		{"input not object", strings.Replace(body(""), `{"a":1}`, `[1]`, 1), "inputData"},
		{"input null", strings.Replace(body(""), `{"a":1}`, `null`, 1), "inputData"},
		{"bad uuid", strings.Replace(body(""), `"agentId":"`+u1, `"agentId":"x`, 1), "agentId"},
		{"timeout 0", body(`,"constraints":{"timeout":0}`), "timeout"},
		{"memory small", body(`,"constraints":{"memory":1}`), "memory"},
		{"not json", `{`, "malformed"},
		{"input files", strings.Replace(body(""), `{"a":1}`, `{"files":{"notes.md":"# Notes","src/a.go":"package a"}}`, 1), ""},
		{"input files not strings", strings.Replace(body(""), `{"a":1}`, `{"files":[1,2]}`, 1), ""},
		{"input file up", strings.Replace(body(""), `{"a":1}`, `{"files":{"../../etc/cron.d/x":"x"}}`, 1), "not a clean relative path"},
		{"input file absolute", strings.Replace(body(""), `{"a":1}`, `{"files":{"/etc/passwd":"x"}}`, 1), "not a relative path"},
		{"input file dot", strings.Replace(body(""), `{"a":1}`, `{"files":{"a/./b":"x"}}`, 1), "not a clean relative path"},
		{"input file input.json", strings.Replace(body(""), `{"a":1}`, `{"files":{"input.json":"x"}}`, 1), "taken"},
		{"input file and folder", strings.Replace(body(""), `{"a":1}`, `{"files":{"a":"x","a/b":"y"}}`, 1), "both a file and a folder"},
		{"input file content not a string", strings.Replace(body(""), `{"a":1}`, `{"files":{"a.md":"x","b.md":1,"../c":2}}`, 1), "not a string"},
		{"input file name too long", strings.Replace(body(""), `{"a":1}`, `{"files":{"`+strings.Repeat("a", 256)+`":"x"}}`, 1), "longer than 255 bytes"},
		{"input file name of 255 bytes", strings.Replace(body(""), `{"a":1}`, `{"files":{"d/`+strings.Repeat("a", 255)+`":"x"}}`, 1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, msg := job.ParseCreate([]byte(tt.in))
			if (tt.want == "") != (msg == "") || !strings.Contains(msg, tt.want) {
				t.Errorf("ParseCreate(%s) = %q, want %q", tt.in, msg, tt.want)
			}
		})
	}
}

// ParseCreate, for any body: what it accepts has every id a UUID, a token
// limit and constraints in range, inputData one JSON object within its
// bound; encoded back to JSON (another layout, ids in upper case) it is
// accepted again as the same request, of the same Hash, so a replay is told
// from another request by what it says, not how it is written. The message
// of a refusal is one line.
func FuzzParseCreate(f *testing.F) {
	f.Add(body(""))
	f.Add(body(`,"constraints":{"timeout":60}`))
	f.Add(body(`,"constraints":{"timeout":60,"memory":512,"network":true}`))
	f.Add(strings.Replace(body(""), `{"a":1}`, ` { "b" : [1, 2.50, "<&>"], "c": {} } `, 1))
	f.Add(strings.Replace(body(""), `{"a":1}`, `{"a":1} `, 1) + ` {}`)
	f.Fuzz(func(t *testing.T, in string) {
		req, msg := job.ParseCreate([]byte(in))
		if msg != "" {
			if strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("message %q", msg)
			}
			return
		}
		for _, id := range []string{req.CommandID, req.PlanStepID, req.AgentID, req.IdentityID, req.ContextID} {
			if !job.ValidUUID(id) {
				t.Fatalf("accepted id %q", id)
			}
		}
		if req.TokenLimit < 1 || req.TokenLimit > job.MaxTokenLimit || len(req.InputData) > job.MaxInputBytes || !json.Valid(req.InputData) || req.InputData[0] != '{' {
			t.Fatalf("accepted %q as %+v", in, req)
		}
		if c := req.Constraints; c != nil && ((c.Timeout != nil && (*c.Timeout < 1 || *c.Timeout > job.MaxTimeout)) || (c.Memory != nil && (*c.Memory < job.MinMemoryMiB || *c.Memory > job.MaxMemoryMiB))) {
			t.Fatalf("accepted constraints %+v", c)
		}
		re := req
		re.CommandID, re.AgentID = strings.ToUpper(re.CommandID), strings.ToUpper(re.AgentID)
		var indented bytes.Buffer
		if err := json.Indent(&indented, req.InputData, "", "  "); err != nil {
			t.Fatal(err)
		}
		re.InputData = indented.Bytes()
		raw, err := json.MarshalIndent(re, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if len(re.InputData) > job.MaxInputBytes || len(raw) > job.MaxCreateBytes {
			return // the layout made it too large
		}
		again, msg := job.ParseCreate(raw)
		if msg != "" || again.Hash() != req.Hash() {
			t.Fatalf("%q re-encoded as %s: %q, hash %s, was %s", in, raw, msg, again.Hash(), req.Hash())
		}
	})
}

func TestHeadersAndMismatch(t *testing.T) {
	h, missing := job.ReadHeaders(func(n string) string {
		return map[string]string{"x-identity-id": u2, "x-context-id": u1, "x-plan-step-id": " "}[n]
	})
	if strings.Join(missing, ",") != "x-command-id,x-plan-step-id" {
		t.Errorf("missing %v", missing)
	}
	req, _ := job.ParseCreate([]byte(body("")))
	h.CommandID, h.PlanStepID = u1, strings.ToUpper(u2)
	if m := req.Mismatch(h); m != "" {
		t.Errorf("matching headers: %q", m)
	}
	h.ContextID = u2
	if m := req.Mismatch(h); !strings.Contains(m, "x-context-id") {
		t.Errorf("context mismatch: %q", m)
	}
	// The same request hashes the same whatever its layout.
	again, _ := job.ParseCreate([]byte(strings.Replace(body(""), `{"a":1}`, `{ "a" : 1 }`, 1)))
	if req.Hash() != again.Hash() {
		t.Error("hash depends on the input's layout")
	}
}

func TestProfileValidate(t *testing.T) {
	temp := 0.7
	ok := job.ProfileInput{Name: "W", Level: "L2", Provider: "anthropic", Model: "claude", MaxTokens: 100, Temperature: &temp,
		AllowedSkills: []string{"read", "review"}, Agentfiles: map[string]string{"review": "# Review"}}
	tests := []struct {
		name     string
		mut      func(*job.ProfileInput)
		scripted bool
		want     string
	}{
		{"valid", func(*job.ProfileInput) {}, false, ""},
		{"level", func(p *job.ProfileInput) { p.Level = "L3" }, false, "agent_level"},
		{"provider", func(p *job.ProfileInput) { p.Provider = "acme" }, false, "llm_provider"},
		{"scripted off the dev stack", func(p *job.ProfileInput) { p.Provider = "scripted" }, false, "llm_provider"},
		{"scripted on the dev stack", func(p *job.ProfileInput) { p.Provider = "scripted" }, true, ""},
		{"no skills list", func(p *job.ProfileInput) { p.AllowedSkills = nil }, false, "allowed_skills"},
		{"unknown skill", func(p *job.ProfileInput) { p.AllowedSkills = []string{"sudo"} }, false, "sudo"},
		{"twice", func(p *job.ProfileInput) { p.AllowedSkills = []string{"read", "read"} }, false, "twice"},
		{"agentfile named like a tool", func(p *job.ProfileInput) { p.Agentfiles = map[string]string{"read": "x"} }, false, "Agentfile"},
		{"temperature", func(p *job.ProfileInput) { t := 3.0; p.Temperature = &t }, false, "temperature"},
		{"max tokens", func(p *job.ProfileInput) { p.MaxTokens = 0 }, false, "max_tokens"},
		{"warm pool", func(p *job.ProfileInput) { p.WarmPoolSize = 100 }, false, ""},
		{"warm pool too large", func(p *job.ProfileInput) { p.WarmPoolSize = 101 }, false, "warm_pool_size"},
		{"warm pool negative", func(p *job.ProfileInput) { p.WarmPoolSize = -1 }, false, "warm_pool_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			p.Agentfiles = map[string]string{"review": "# Review"}
			tt.mut(&p)
			if got := p.Validate(tt.scripted); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Validate = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestViewAlerts(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	timeout := 100
	j := job.Job{Status: job.Running, TokenLimit: 100, TokensUsed: 91, StartedAt: start, Constraints: &job.Constraints{Timeout: &timeout},
		Outputs: []job.Output{{Type: job.OutputFile}, {Type: job.OutputLog, Reference: job.Reference{Size: 7}}}}
	v := job.ViewOf(j, start.Add(81*time.Second))
	if len(v.Alerts) != 2 || v.Resources.Duration != 81000 || v.Resources.FilesCreated != 1 || v.Resources.LogsSize != 7 || v.FinishedAt != nil {
		t.Errorf("view %+v", v)
	}
	j.TokensUsed = 90
	if v := job.ViewOf(j, start.Add(79*time.Second)); len(v.Alerts) != 0 {
		t.Errorf("alerts under the thresholds: %+v", v.Alerts)
	}
}

// pagedProfiles serves profiles two to a page.
type pagedProfiles []job.Profile

func (p pagedProfiles) Profiles(_ context.Context, cursor string, _ int) ([]job.Profile, string, error) {
	i, _ := strconv.Atoi(cursor)
	end := min(i+2, len(p))
	next := ""
	if end < len(p) {
		next = strconv.Itoa(end)
	}
	return p[i:end], next, nil
}

// TestPoolTypesListEveryProfileWithAPool: every page is read; a profile
// with a warm_pool_size is a pool type of the platform, job.<id>, of its
// size and no workspace; the others are not. The pool of a profile whose
// tools include bash is cut off from the network (egress none), as its
// jobs without network run; the others' are open.
func TestPoolTypesListEveryProfileWithAPool(t *testing.T) {
	t.Parallel()
	ps := pagedProfiles{{ID: "a", WarmPoolSize: 2}, {ID: "b"}, {ID: "c", WarmPoolSize: 1, AllowedSkills: []string{"read", "bash"}}, {ID: "d"},
		{ID: "e", WarmPoolSize: 3, AllowedSkills: []string{"read"}}}
	types, err := job.PoolTypes{Profiles: ps}.Pooled(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ty := range types {
		got = append(got, fmt.Sprintf("%s:%d:%v:%s:%s", ty.ID, ty.Workspace.WarmPoolSize, ty.Workspace.Enabled, ty.Tenant, ty.Workspace.EgressPolicy().Mode))
	}
	if want := []string{"job.a:2:false::open", "job.c:1:false::none", "job.e:3:false::open"}; !slices.Equal(got, want) {
		t.Errorf("pool types %v, want %v", got, want)
	}
	if !job.IsPoolType(job.PoolType("a")) || job.IsPoolType("a") {
		t.Error("IsPoolType")
	}
}
