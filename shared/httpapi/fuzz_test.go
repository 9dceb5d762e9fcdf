package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// fuzzBody has a field of each kind route bodies have.
type fuzzBody struct {
	Name   string            `json:"name"`
	Count  int               `json:"count"`
	Ratio  float64           `json:"ratio,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
	Values map[string]string `json:"values,omitempty"`
	Nested *struct {
		On   bool            `json:"on"`
		Args json.RawMessage `json:"args,omitempty"`
	} `json:"nested,omitempty"`
}

// fuzzFields are fuzzBody's JSON field paths: the only client-visible names
// a decode error may mention.
var fuzzFields = map[string]bool{"name": true, "count": true, "ratio": true, "tags": true, "values": true, "nested": true, "nested.on": true, "nested.args": true}

// decodeMessages are every message DecodeJSON may give: fixed text, numbers,
// and the route's own field names, never the client's.
var decodeMessages = regexp.MustCompile(`^(` + strings.Join([]string{
	`The request body is larger than \d+ bytes\.`,
	`The request body is not valid base64\.`,
	`The request body must be a JSON object\.`,
	`The request body is not valid JSON \(at byte \d+\)\.`,
	`Field "([a-z.]+)" must be of type (string|boolean|object|array|number)\.`,
	`Field "([a-z.]+)" must be a whole number in range\.`,
	`A time in the request body is not RFC 3339, such as 2026-12-01T10:00:00Z\.`,
	`The request body has a field this route does not take\.`,
	`The request body is truncated JSON\.`,
	`The request body is not valid JSON\.`,
	`The request body must hold a single JSON object\.`,
}, "|") + `)$`)

// DecodeJSON, whatever the body: a body over the limit is refused (a 413
// payload_too_large envelope); another error is invalid_request (a 400
// envelope); each with one of the fixed messages; a
// success is one JSON object of known fields within the limit, which
// encodes back to a body that decodes to the same value.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(`{"name":"a","count":2}`, false, uint16(64))
	f.Add(`{"name":"a","tags":["x"],"values":{"k":"v"},"nested":{"on":true,"args":{"a":[1,2]}}}`, false, uint16(1024))
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"name":"a"}`)), true, uint16(12))
	f.Add(`null`, false, uint16(64))
	f.Add(` {"count":1e400} `, false, uint16(64))
	f.Add(`{"NAME":"case","nested":{"ON":true}}`, false, uint16(64))
	f.Add(`{"name":"a"} {"name":"b"}`, false, uint16(64))
	f.Add(`{"values":{"k":1}}`, false, uint16(64))
	f.Fuzz(func(t *testing.T, body string, b64 bool, limit16 uint16) {
		limit := int(limit16)%4096 + 1
		raw := []byte(body)
		if b64 {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
				raw = nil
			}
		}
		var v fuzzBody
		err := httpapi.DecodeJSON(httpapi.Request{Body: body, IsBase64Encoded: b64}, limit, &v)
		if err != nil {
			var e *apierror.Error
			tooLarge := errors.As(err, &e) && e.Code == apierror.PayloadTooLarge && httpapi.EnvelopeOf(err).Status == 413
			if tooLarge && len(body) <= limit && !b64 {
				t.Fatalf("%d bytes refused as over a limit of %d", len(body), limit)
			}
			if !tooLarge && (e == nil || e.Code != apierror.InvalidRequest || httpapi.EnvelopeOf(err).Status != 400) {
				t.Fatalf("error %v is neither a 413 payload_too_large nor a 400 invalid_request", err)
			}
			m := decodeMessages.FindStringSubmatch(e.Message)
			if m == nil || (m[2] != "" && !fuzzFields[m[2]]) {
				t.Fatalf("message %q is not one of DecodeJSON's", e.Message)
			}
			return
		}
		switch {
		case b64 && raw == nil:
			t.Fatalf("accepted %q, which is not base64", body)
		case len(raw) > limit:
			t.Fatalf("accepted %d bytes over a limit of %d", len(raw), limit)
		case !json.Valid(raw):
			t.Fatalf("accepted %q, which is not JSON", raw)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil || top == nil {
			t.Fatalf("accepted %q, which is not one JSON object", raw)
		}
		for k := range top {
			if !fuzzFields[strings.ToLower(k)] {
				t.Fatalf("accepted the unknown field %q", k)
			}
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode %+v: %v", v, err)
		}
		var w fuzzBody
		if err := httpapi.DecodeJSON(httpapi.Request{Body: string(again)}, len(again), &w); err != nil {
			t.Fatalf("re-encoded %s: %v", again, err)
		}
		if twice, _ := json.Marshal(w); !bytes.Equal(twice, again) {
			t.Fatalf("round trip changed the value: %s, then %s", again, twice)
		}
	})
}

// BearerToken returns a trimmed token only from a Bearer header (any case),
// and what it returns, sent again as "Bearer <token>", comes back unchanged.
func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer  abc ")
	f.Add("Basic abc")
	f.Add("Bearer\tabc")
	f.Add(" BEARER a b ")
	f.Fuzz(func(t *testing.T, header string) {
		tok := httpapi.BearerToken(httpapi.Request{Headers: map[string]string{"Authorization": header}})
		if tok == "" {
			return
		}
		if tok != strings.TrimSpace(tok) {
			t.Fatalf("token %q from %q is not trimmed", tok, header)
		}
		scheme, _, _ := strings.Cut(strings.TrimSpace(header), " ")
		if !strings.EqualFold(scheme, "Bearer") || !strings.HasSuffix(strings.TrimSpace(header), tok) {
			t.Fatalf("token %q from %q, which is no bearer header", tok, header)
		}
		if again := httpapi.BearerToken(httpapi.Request{Headers: map[string]string{"authorization": "Bearer " + tok}}); again != tok {
			t.Fatalf("token %q sent again came back as %q", tok, again)
		}
	})
}

// Error turns any error into the one envelope: its status is the code's,
// it is JSON that decodes to itself, an internal error's text never shows,
// and the message holds no control characters.
func FuzzErrorEnvelope(f *testing.F) {
	f.Add("invalid_request", "bad\r\nX-Injected: 1", 0, false)
	f.Add("service_unavailable", "down", 3, false)
	f.Add("no_such_code", "secret detail", 0, false)
	f.Add("", "dial tcp 10.0.0.7:443", 0, true)
	f.Fuzz(func(t *testing.T, code, msg string, retry int, plain bool) {
		var err error = &apierror.Error{Code: apierror.Code(code), Message: msg, RetryAfter: retry}
		if plain {
			err = errors.New(msg)
		}
		res := httpapi.Error(t.Context(), nil, err)
		var env httpapi.Envelope
		dec := json.NewDecoder(strings.NewReader(res.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil {
			t.Fatalf("body %q: %v", res.Body, err)
		}
		if env.Status != res.StatusCode || httpapi.Status(env.ErrorCode) != res.StatusCode || res.Headers["Content-Type"] != "application/json" {
			t.Fatalf("status %d, envelope %+v, headers %v", res.StatusCode, env, res.Headers)
		}
		internal := plain || (code != string(apierror.ServerError) && httpapi.Status(apierror.Code(code)) == 500)
		if internal && (env.ErrorCode != apierror.ServerError || env.Message != "The server could not complete the request." || env.RetryAfterSeconds != 0) {
			t.Fatalf("internal detail shown: %s", res.Body)
		}
		for k, v := range res.Headers {
			if strings.ContainsAny(k+v, "\r\n") {
				t.Fatalf("header %q: %q", k, v)
			}
		}
		if !internal && env.Message != msg && utf8.ValidString(msg) {
			t.Fatalf("message %q became %q", msg, env.Message)
		}
	})
}
