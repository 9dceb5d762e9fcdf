package httpapitest_test

import (
	"runtime"
	"testing"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
)

// recorder is a test whose Fatalf is recorded (and ends the check, as
// testing's does).
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}

// fails reports whether check failed its test.
func fails(check func(testing.TB)) bool {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed
}

func TestEnvelope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		res      httpapi.Response
		statuses []int
		ok       bool
	}{
		{"an envelope", httpapi.Response{StatusCode: 404, Body: `{"status":404,"error_code":"agent_not_found","message":"No such agent.","retryable":false}`}, nil, true},
		{"of a status wanted", httpapi.Response{StatusCode: 404, Body: `{"status":404,"error_code":"agent_not_found","message":"No such agent.","retryable":false}`}, []int{400, 404}, true},
		{"of another status", httpapi.Response{StatusCode: 404, Body: `{"status":404,"error_code":"agent_not_found","message":"No such agent.","retryable":false}`}, []int{400}, false},
		{"a status other than the body's", httpapi.Response{StatusCode: 400, Body: `{"status":404,"error_code":"agent_not_found","message":"x","retryable":false}`}, nil, false},
		{"a code of another status", httpapi.Response{StatusCode: 400, Body: `{"status":400,"error_code":"agent_not_found","message":"x","retryable":false}`}, nil, false},
		{"a field of its own", httpapi.Response{StatusCode: 400, Body: `{"status":400,"error_code":"invalid_request","message":"x","retryable":false,"extra":1}`}, nil, false},
		{"a line break in the message", httpapi.Response{StatusCode: 400, Body: `{"status":400,"error_code":"invalid_request","message":"a\nb","retryable":false}`}, nil, false},
		{"not JSON", httpapi.Response{StatusCode: 500, Body: `oops`}, nil, false},
	}
	for _, tt := range tests {
		failed := fails(func(t testing.TB) { httpapitest.Envelope(t, tt.res, tt.statuses...) })
		if failed == tt.ok {
			t.Errorf("%s: failed %v", tt.name, failed)
		}
	}
}

// A route's own error body: its fields are allowed, the envelope in it checked.
func TestDecode(t *testing.T) {
	t.Parallel()
	type failure struct {
		httpapi.Envelope
		Success bool `json:"success"`
	}
	res := httpapi.Response{StatusCode: 400, Body: `{"status":400,"error_code":"invalid_request","message":"x","retryable":false,"success":false}`}
	var out failure
	if fails(func(t testing.TB) { httpapitest.Decode(t, res, &out) }) || out.Message != "x" {
		t.Errorf("decoded %+v", out)
	}
	res.StatusCode = 404
	if !fails(func(t testing.TB) { httpapitest.Decode(t, res, &out) }) {
		t.Error("a body of another status passed")
	}
}
