// Package httpapitest checks, for tests and fuzz targets, that a handler's
// error answer is the one error envelope of package httpapi: JSON of the
// envelope's fields only, its status the response's and its error code's, its
// message UTF-8 without control characters (no line break or terminal escape
// of a client's reaches a log or a terminal that shows it).
package httpapitest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// Envelope checks that res is an error envelope, of one of statuses when any
// are given, and returns it. A check that fails ends the test.
func Envelope(t testing.TB, res httpapi.Response, statuses ...int) httpapi.Envelope {
	t.Helper()
	var env httpapi.Envelope
	Decode(t, res, &env, statuses...)
	return env
}

// Decode is Envelope for a route whose error body has fields of its own
// beside the envelope's: it decodes res's body into body (a struct embedding
// httpapi.Envelope), refusing fields body does not have, checks the envelope
// in it and returns the envelope.
func Decode(t testing.TB, res httpapi.Response, body any, statuses ...int) httpapi.Envelope {
	t.Helper()
	if len(statuses) > 0 && !slices.Contains(statuses, res.StatusCode) {
		t.Fatalf("status %d (%s), want one of %v", res.StatusCode, res.Body, statuses)
	}
	dec := json.NewDecoder(strings.NewReader(res.Body))
	dec.DisallowUnknownFields()
	var env httpapi.Envelope
	err := dec.Decode(body)
	if err == nil {
		err = json.Unmarshal([]byte(res.Body), &env)
	}
	if err != nil || env.Status != res.StatusCode || httpapi.Status(env.ErrorCode) != res.StatusCode {
		t.Fatalf("status %d, body %s: not its envelope (%v)", res.StatusCode, res.Body, err)
	}
	if !utf8.ValidString(env.Message) || strings.IndexFunc(env.Message, unicode.IsControl) >= 0 {
		t.Fatalf("message %q holds control characters", env.Message)
	}
	return env
}
