package orchestratorapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/orchestratorapi"
)

func TestSameRole(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/orchestrator"
	tests := []struct {
		caller string
		want   bool
	}{
		{role, true},
		{"arn:aws:sts::123456789012:assumed-role/orchestrator/session-1", true},
		{"arn:aws:sts::123456789012:assumed-role/orchestrator-2/s", false},
		{"arn:aws:sts::999999999999:assumed-role/orchestrator/s", false},
		{"arn:aws:iam::123456789012:user/orchestrator", false},
		{"arn:aws-cn:sts::123456789012:assumed-role/orchestrator/s", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := orchestratorapi.SameRole(role, tt.caller); got != tt.want {
			t.Errorf("SameRole(%q) = %v, want %v", tt.caller, got, tt.want)
		}
	}
}

// signed is an Authorization header signing headers.
func signed(headers string) string {
	return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261129/us-east-1/execute-api/aws4_request, SignedHeaders=" + headers +
		", Signature=" + strings.Repeat("ab", 32)
}

// On AWS the handler takes only the orchestrator's role, whatever API
// Gateway let through, and checks the headers before anything else.
func TestGuard(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/orchestrator"
	h := &orchestratorapi.Handlers{Caller: role}
	create := h.Routes()[0].Handler
	req := func(caller string, headers map[string]string) httpapi.Request {
		r := httpapi.Request{RouteKey: "POST /internal/jobs", Headers: headers, Body: "{not json"}
		if caller != "" {
			r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: caller}}
		}
		return r
	}
	for _, tt := range []struct {
		name   string
		r      httpapi.Request
		status int
		code   string
	}{
		{"no caller", req("", nil), 403, "forbidden"},
		{"another role", req("arn:aws:iam::123456789012:role/other", nil), 403, "forbidden"},
		{"headers missing, body unread", req(role, map[string]string{"x-context-id": "c", "authorization": signed("host;x-amz-date;x-context-id")}), 400, "missing_headers"},
		// API Gateway checked the signature; the identity headers must be
		// part of what it signs.
		{"identity header unsigned", req(role, map[string]string{"x-context-id": "c", "x-identity-id": "i", "authorization": signed("host;x-amz-date;x-context-id")}), 403, "forbidden"},
		{"no signature", req(role, map[string]string{"x-context-id": "c"}), 403, "forbidden"},
	} {
		res, err := create(context.Background(), tt.r)
		env := struct {
			Code    string         `json:"error_code"`
			Details map[string]any `json:"details"`
		}{}
		_ = json.Unmarshal([]byte(res.Body), &env)
		if err != nil || res.StatusCode != tt.status || env.Code != tt.code {
			t.Errorf("%s: %d %s %v", tt.name, res.StatusCode, res.Body, err)
		}
		if tt.code == "missing_headers" && len(env.Details["missing"].([]any)) != 3 {
			t.Errorf("missing: %s", res.Body)
		}
	}
}
