package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// A function URL's request reaches a streaming route as the HTTP API event
// its handler knows: path parameters, query, who signed it (auth type
// AWS_IAM); the body streams as the handler writes it.
func TestFunctionURLStreamPassesTheRequestAndStreamsTheBody(t *testing.T) {
	h := func(_ context.Context, req httpapi.Request) (httpapi.Response, httpapi.BodyWriter) {
		caller := ""
		if a := req.RequestContext.Authorizer; a != nil && a.IAM != nil {
			caller = a.IAM.UserARN
		}
		return httpapi.Response{StatusCode: http.StatusOK, Headers: map[string]string{"Content-Type": "text/plain"}}, func(w io.Writer, flush func()) error {
			_, err := fmt.Fprintf(w, "id=%s after=%s caller=%s", req.PathParameters["id"], req.QueryStringParameters["after"], caller)
			flush()
			return err
		}
	}
	serve := httpapi.FunctionURLStream(http.MethodGet, "/internal/jobs/{id}/logs/stream", h)
	in := events.LambdaFunctionURLRequest{RawPath: "/internal/jobs/j-1/logs/stream", QueryStringParameters: map[string]string{"after": "7"}}
	in.RequestContext.HTTP.Method = http.MethodGet
	in.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
		IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:sts::123456789012:assumed-role/orchestrator/s"},
	}
	res, err := serve(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "id=j-1 after=7 caller=arn:aws:sts::123456789012:assumed-role/orchestrator/s"; res.StatusCode != http.StatusOK || string(body) != want {
		t.Errorf("got %d %q, want 200 %q", res.StatusCode, body, want)
	}

	in.RequestContext.Authorizer = nil
	res, err = serve(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(res.Body); string(body) != "id=j-1 after=7 caller=" {
		t.Errorf("unsigned: %q, want no caller", body)
	}
	in.RawPath = "/internal/jobs/j-1/other"
	if res, err = serve(t.Context(), in); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("another path: %d %v, want 404", res.StatusCode, err)
	}
}
