package e2bapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

func TestDepth(t *testing.T) {
	for raw, want := range map[string]int{
		`{}`:                          1,
		`{"a":{"b":[1,{"c":2}]}}`:     4,
		`{"s":"[[[[{{{{"}`:            1,
		`{"s":"\"[[[","t":[]}`:        2,
		`[` + strings.Repeat(`[`, 99): 100,
	} {
		if got := depth([]byte(raw)); got != want {
			t.Errorf("depth(%.30q) = %d, want %d", raw, got, want)
		}
	}
}

func TestDecodeIgnoresWhatItDoesNotKnowWithinItsDepth(t *testing.T) {
	var in struct {
		Timeout *int `json:"timeout"`
	}
	if err := decode(httpapi.Request{Body: `{"timeout":5,"network":{"rules":{"h":[{"transform":{"headers":{}}}]}},"mcp":null}`}, &in); err != nil || in.Timeout == nil || *in.Timeout != 5 {
		t.Fatalf("an SDK's body: %v %+v", err, in)
	}
	if err := decode(httpapi.Request{Body: ""}, &in); err != nil {
		t.Errorf("no body: %v", err)
	}
	deep := `{"x":` + strings.Repeat(`[`, MaxBodyDepth) + strings.Repeat(`]`, MaxBodyDepth) + `}`
	if err := decode(httpapi.Request{Body: deep}, &in); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("a body nested %d deep: %v", MaxBodyDepth+1, err)
	}
	if err := decode(httpapi.Request{Body: `[1]`}, &in); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("not an object: %v", err)
	}
}

// TestErrorsAreTheSDKsBody: {code: status, message, error_code}, the retry
// delay kept; an internal error shows nothing of its cause.
func TestErrorsAreTheSDKsBody(t *testing.T) {
	h := &Handlers{}
	res, _ := h.fail(context.Background(), &apierror.Error{Code: apierror.QuotaExceeded, Message: "Too many.", RetryAfter: 30})
	var body map[string]any
	if err := json.Unmarshal([]byte(res.Body), &body); err != nil || res.StatusCode != http.StatusTooManyRequests ||
		body["code"] != float64(429) || body["message"] != "Too many." || body["error_code"] != "quota_exceeded" || res.Headers["Retry-After"] != "30" {
		t.Errorf("quota: %d %v %s", res.StatusCode, res.Headers, res.Body)
	}
	res, _ = h.fail(context.Background(), errors.New("dial tcp 10.0.0.1: refused"))
	if res.StatusCode != http.StatusInternalServerError || strings.Contains(res.Body, "10.0.0.1") || !strings.Contains(res.Body, `"code":500`) {
		t.Errorf("internal: %d %s", res.StatusCode, res.Body)
	}
}
