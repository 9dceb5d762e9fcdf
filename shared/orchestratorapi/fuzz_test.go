package orchestratorapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/orchestratorapi"
)

const (
	role = "arn:aws:iam::123456789012:role/orchestrator"
	u1   = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
	u2   = "0f8fad5b-d9cb-469f-a165-70867728950e"
)

// store records what reaches it: a profile put is stored and answered;
// anything read fails as an outage would (503).
type store struct {
	job.Store // only the methods below are called
	reached   bool
	put       *job.Profile
	profileOf string
}

func down() error { return apierror.Unavailable(errors.New("fuzz: not stored")) }

func (s *store) Profile(_ context.Context, id string) (job.Profile, error) {
	s.reached, s.profileOf = true, id
	return job.Profile{}, down()
}

func (s *store) Get(context.Context, string) (job.Job, error) {
	s.reached = true
	return job.Job{}, down()
}

func (s *store) PutProfile(_ context.Context, p job.Profile) (job.Profile, error) {
	s.reached, s.put = true, &p
	return p, nil
}

func routes() (map[string]httpapi.Handler, *store) {
	st := &store{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &orchestratorapi.Handlers{Jobs: job.New(job.Options{Store: st, Now: func() time.Time { return now }}), Caller: role, Log: slog.New(slog.DiscardHandler)}
	out := map[string]httpapi.Handler{}
	for _, r := range h.Routes() {
		out[r.Key()] = r.Handler
	}
	return out, st
}

// orchestrator is a request of the orchestrator's role with headers, signed
// over them all (API Gateway checked the signature).
func orchestrator(body string, headers map[string]string) httpapi.Request {
	h := map[string]string{"authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261129/us-east-1/execute-api/aws4_request, " +
		"SignedHeaders=host;x-amz-date;x-command-id;x-context-id;x-identity-id;x-plan-step-id, Signature=" + strings.Repeat("ab", 32)}
	maps.Copy(h, headers)
	req := httpapi.Request{Body: body, Headers: h}
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: role}}
	return req
}

func createBody(extra string) string {
	return `{"commandId":"` + u1 + `","planStepId":"` + u2 + `","agentId":"` + strings.ToUpper(u1) + `","identityId":"` + u2 + `","contextId":"` + u1 +
		`","tokenLimit":10,"inputData":{"a":1}` + extra + `}`
}

// POST /internal/jobs: any body, base64 or not, with the mandatory headers
// the body's own ids (in another case), or with a plan step that differs.
// The body is refused as ParseCreate refuses it, missing headers before
// it, a header that differs from its field after it; a create that passes
// all reaches the store for the profile it names (lower case).
func FuzzCreate(f *testing.F) {
	f.Add(createBody(""), false, false)
	f.Add(createBody(`,"constraints":{"timeout":60,"memory":512}`), false, true)
	f.Add(createBody(`,"extra":1`), true, false)
	f.Add(`{"commandId":""}`, false, false)
	f.Fuzz(func(t *testing.T, body string, b64, otherStep bool) {
		var loose job.CreateRequest
		_ = json.Unmarshal([]byte(body), &loose)
		headers := map[string]string{"x-identity-id": strings.ToUpper(loose.IdentityID), "x-context-id": loose.ContextID,
			"x-command-id": strings.ToUpper(loose.CommandID), "x-plan-step-id": loose.PlanStepID}
		if otherStep {
			headers["x-plan-step-id"] = u1 + "0"
		}
		hd, missing := job.ReadHeaders(func(n string) string { return headers[n] })
		raw := body
		if b64 {
			raw = base64.StdEncoding.EncodeToString([]byte(body))
		}
		rs, st := routes()
		req := orchestrator(raw, headers)
		req.IsBase64Encoded = b64
		res, err := rs["POST /internal/jobs"](t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res)
		if len(missing) > 0 {
			if env.ErrorCode != apierror.MissingHeaders || st.reached {
				t.Fatalf("headers %v missing: %+v", missing, env)
			}
			return
		}
		in, msg := job.ParseCreate([]byte(body))
		switch {
		case len(body) > job.MaxCreateBytes:
			if env.ErrorCode != apierror.InvalidRequest || st.reached {
				t.Fatalf("%d bytes: %+v", len(body), env)
			}
		case msg != "":
			if env.ErrorCode != apierror.InvalidRequest || env.Message != msg || st.reached {
				t.Fatalf("ParseCreate says %q; answered %+v", msg, env)
			}
		case in.Mismatch(hd) != "":
			if env.ErrorCode != apierror.InvalidRequest || !strings.Contains(env.Message, "must equal") || st.reached {
				t.Fatalf("mismatch %q; answered %+v", in.Mismatch(hd), env)
			}
		default:
			if env.ErrorCode != apierror.ServiceUnavailable || st.profileOf != strings.ToLower(in.AgentID) {
				t.Fatalf("valid create answered %+v; looked up %q", env, st.profileOf)
			}
		}
	})
}

// PUT /internal/agents/{id}: any id and body. The profile is refused
// (nothing stored) or stored as sent, under the id in lower case, with the
// default temperature if it names none; what is stored is a profile that
// validates again. The same request twice gets the same answer.
func FuzzPutProfile(f *testing.F) {
	f.Add(u1, `{"name":"W","agent_level":"L2","llm_provider":"anthropic","llm_model":"claude","max_tokens":100,"temperature":0.7,"allowed_skills":["read","review"],"agentfiles":{"review":"# Review"}}`)
	f.Add(strings.ToUpper(u2), `{"name":"W","agent_level":"L0","llm_provider":"openai","llm_model":"m","max_tokens":1,"allowed_skills":[]}`)
	f.Add(u1, `{"name":"W","agent_level":"L1","llm_provider":"local","llm_model":"m","max_tokens":5,"allowed_skills":["a","b"],"agentfiles":{"read":"x","B":"y","a":""}}`)
	f.Add("x", `{}`)
	f.Fuzz(func(t *testing.T, id, body string) {
		answer := func() (httpapi.Response, *store) {
			rs, st := routes()
			req := orchestrator(body, map[string]string{"x-identity-id": u1, "x-context-id": u1, "x-command-id": u1, "x-plan-step-id": u1})
			req.PathParameters = map[string]string{"id": id}
			res, err := rs["PUT /internal/agents/{id}"](t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			return res, st
		}
		res, st := answer()
		if again, _ := answer(); again.StatusCode != res.StatusCode || again.Body != res.Body {
			t.Fatalf("the same request answered %s, then %s", res.Body, again.Body)
		}
		var in job.ProfileInput
		derr := httpapi.DecodeJSON(httpapi.Request{Body: body}, orchestratorapi.MaxProfileBytes, &in)
		if res.StatusCode != 200 {
			env := httpapitest.Envelope(t, res)
			if env.ErrorCode != apierror.InvalidRequest || st.put != nil || (derr != nil && env.Message != httpapi.EnvelopeOf(derr).Message) {
				t.Fatalf("answered %+v (stored %+v); decode %v", env, st.put, derr)
			}
			if derr == nil && job.ValidUUID(id) && in.Validate(false) == "" {
				t.Fatalf("refused a valid profile: %+v", env)
			}
			return
		}
		p := st.put
		var out job.Profile
		if err := json.Unmarshal([]byte(res.Body), &out); err != nil || derr != nil || p == nil || !reflect.DeepEqual(out, *p) {
			t.Fatalf("200 %s (%v); decode %v; stored %+v", res.Body, err, derr, p)
		}
		temp := job.DefaultTemperature
		if in.Temperature != nil {
			temp = *in.Temperature
		}
		if !job.ValidUUID(id) || p.ID != strings.ToLower(id) || p.Name != in.Name || p.Level != in.Level || p.Provider != in.Provider || p.Model != in.Model ||
			p.MaxTokens != in.MaxTokens || p.Temperature != temp || !reflect.DeepEqual(p.AllowedSkills, in.AllowedSkills) {
			t.Fatalf("stored %+v for %s %+v", p, id, in)
		}
		back := job.ProfileInput{Name: p.Name, Level: p.Level, Provider: p.Provider, Model: p.Model, MaxTokens: p.MaxTokens, Temperature: &p.Temperature,
			AllowedSkills: p.AllowedSkills, Agentfiles: p.Agentfiles}
		if msg := back.Validate(false); msg != "" {
			t.Fatalf("stored %+v, which is invalid: %s", p, msg)
		}
	})
}

// GET /internal/jobs/{id}/logs?after=&wait=: after is a non-negative cursor,
// wait a number of seconds from 0 to MaxLogWait; anything else is refused
// before the job is read.
func FuzzLogsQuery(f *testing.F) {
	f.Add("", "")
	f.Add("17", "20")
	f.Add("-1", "5")
	f.Add("0", "21")
	f.Add("9223372036854775807", "100000")
	f.Fuzz(func(t *testing.T, after, wait string) {
		rs, st := routes()
		req := orchestrator("", map[string]string{"x-identity-id": u1, "x-context-id": u1, "x-command-id": u1, "x-plan-step-id": u1})
		req.PathParameters = map[string]string{"id": u2}
		req.QueryStringParameters = map[string]string{"after": after, "wait": wait}
		res, err := rs["GET /internal/jobs/{id}/logs"](t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res)
		a, aerr := strconv.ParseInt(after, 10, 64)
		w, werr := strconv.ParseInt(wait, 10, 64)
		valid := (after == "" || (aerr == nil && a >= 0)) && (wait == "" || (werr == nil && w >= 0 && w <= int64(job.MaxLogWait/time.Second)))
		if valid != st.reached || (valid && env.ErrorCode != apierror.ServiceUnavailable) || (!valid && env.ErrorCode != apierror.InvalidRequest) {
			t.Fatalf("after=%q wait=%q answered %+v; read the job: %v", after, wait, env, st.reached)
		}
	})
}
