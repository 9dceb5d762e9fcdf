// Package apitest checks HTTP traffic against the API's OpenAPI document
// (package api), so that the document cannot drift from what the handlers
// send: tests put a Validator in front of the server (Middleware), and every
// answer is checked against the operation of its route: its status is one the
// operation documents, its headers and JSON body match the schemas, an error
// is the standard envelope with a code of its status, and each frame of the
// events stream is a StreamFrame. A request the server accepted (2xx) must be
// one the document allows, so that the document is not stricter than the
// server either. Requests to no route are answered the error envelope.
//
// It is test support: it uses kin-openapi, which validates OpenAPI 3.1
// documents with a JSON Schema 2020-12 validator.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/remote-agents/remote-agents/api"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// maxBody bounds what is kept of a request or an answer for checking; a
// longer answer's body is not checked (its status and headers are).
const maxBody = 16 << 20

// Load returns the API's document, loaded and checked as OpenAPI 3.1.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("the OpenAPI document is version %s, not 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	return doc, nil
}

// DocPath is the document's path of a route table path: OpenAPI has no
// greedy parameter, so {proxy+} is {proxy} (described as taking the rest).
func DocPath(p string) string { return strings.ReplaceAll(p, "+}", "}") }

// Validator checks request/response pairs against the document and keeps
// what it found wrong.
type Validator struct {
	doc    *openapi3.T
	routes []routes.Route

	mu       sync.Mutex
	problems []string
}

// New returns a Validator of the API's document.
func New() (*Validator, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	return &Validator{doc: doc, routes: routes.All()}, nil
}

// Problems returns what was found wrong so far.
func (v *Validator) Problems() []string {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.problems...)
}

func (v *Validator) report(r *http.Request, status int, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.problems = append(v.problems, fmt.Sprintf("%s %s → %d: %s", r.Method, r.URL.Path, status, fmt.Sprintf(format, args...)))
}

// Middleware checks every exchange next serves. CORS preflights (OPTIONS)
// are not API operations and pass unchecked.
func (v *Validator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		// The body is kept as the handler reads it: a server may answer
		// before reading it (a declared length over its limit).
		// (On a copy of r: the server looks at r's own body once done.)
		reqBody := &capped{}
		inner := r.WithContext(r.Context())
		inner.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, reqBody), r.Body}
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, inner)
		v.check(r, reqBody.Bytes(), rec)
	})
}

func (v *Validator) check(r *http.Request, reqBody []byte, rec *recorder) {
	status := rec.code()
	route, params := v.match(r)
	if route == nil {
		// No route (404), or not its method (405): the envelope.
		v.checkEnvelope(r, status, rec)
		return
	}
	path := DocPath(route.Path)
	item := v.doc.Paths.Find(path)
	if item == nil || item.GetOperation(route.Method) == nil {
		v.report(r, status, "route %s is not in the document", route.Key())
		return
	}
	kr := &routers.Route{Spec: v.doc, Path: path, PathItem: item, Method: route.Method, Operation: item.GetOperation(route.Method)}
	ctx := context.Background()
	model := route.Function == "model"
	in := &openapi3filter.RequestValidationInput{
		Request:    cloneRequest(r, reqBody),
		PathParams: params,
		Route:      kr,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: model, MultiError: true},
	}
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			v.report(r, status, "the server accepted a request the document rejects: %v", err)
		}
	}
	ct := rec.Header().Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ct)
	body := rec.body.Bytes()
	isJSON := mediaType == "application/json" && !model && !rec.overflow
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 rec.Header(),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: !isJSON, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		v.report(r, status, "%v (body %.300q)", err, body)
		return
	}
	if isJSON || model {
		return // the model route's answers are the provider's
	}
	// Bodies the filter does not read: the content type must be documented.
	res := kr.Operation.Responses.Status(status)
	if res == nil {
		res = kr.Operation.Responses.Default()
	}
	if res == nil || res.Value == nil || len(res.Value.Content) == 0 {
		return
	}
	if len(body) > 0 && res.Value.Content.Get(ct) == nil {
		v.report(r, status, "content type %q is not documented", ct)
		return
	}
	if mediaType == "text/event-stream" && !rec.overflow {
		v.checkStream(r, status, body, frameSchema(res.Value.Content.Get(ct)))
	}
}

// checkEnvelope checks the answer to a request of no route.
func (v *Validator) checkEnvelope(r *http.Request, status int, rec *recorder) {
	var env struct {
		Status int `json:"status"`
	}
	if err := json.Unmarshal(rec.body.Bytes(), &env); err != nil {
		v.report(r, status, "no route, and the answer is not the error envelope: %.200q", rec.body.Bytes())
		return
	}
	schema := v.doc.Components.Schemas["Error"].Value
	var value any
	_ = json.Unmarshal(rec.body.Bytes(), &value)
	if err := v.doc.ValidateSchemaJSON(schema, value, openapi3.EnableJSONSchema2020()); err != nil {
		v.report(r, status, "the error envelope does not match Error: %v", err)
	}
	if env.Status != status {
		v.report(r, status, "the envelope's status is %d", env.Status)
	}
}

// frameSchema names the schema of a stream's frames: the stream's
// x-frame, else StreamFrame (the events stream's).
func frameSchema(m *openapi3.MediaType) string {
	if m != nil && m.Schema != nil && m.Schema.Value != nil {
		if name, ok := m.Schema.Value.Extensions["x-frame"].(string); ok {
			return name
		}
	}
	return "StreamFrame"
}

// checkStream checks each frame of a stream against the schema name.
func (v *Validator) checkStream(r *http.Request, status int, body []byte, name string) {
	ref := v.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		v.report(r, status, "the stream's frame schema %s is not in the document", name)
		return
	}
	schema := ref.Value
	frames, err := Frames(body)
	if err != nil {
		v.report(r, status, "the event stream: %v", err)
		return
	}
	for _, f := range frames {
		if err := v.doc.ValidateSchemaJSON(schema, f, openapi3.EnableJSONSchema2020()); err != nil {
			raw, _ := json.Marshal(f)
			v.report(r, status, "stream frame %s does not match %s: %v", raw, name, err)
		}
	}
}

// Frames parses a Server-Sent Events body into its frames, each the map of
// its fields (id, event, retry as a number, data as JSON); comments are
// dropped, and a last frame without its blank line is left out (the stream
// was cut).
func Frames(body []byte) ([]map[string]any, error) {
	var frames []map[string]any
	frame := map[string]any{}
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxBody)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				var d any
				if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &d); err != nil {
					return nil, fmt.Errorf("data is not JSON: %q", strings.Join(data, "\n"))
				}
				frame["data"] = d
			}
			if len(frame) > 0 {
				frames = append(frames, frame)
			}
			frame, data = map[string]any{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "data":
			data = append(data, value)
		case "retry":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("retry is not a number: %q", value)
			}
			frame["retry"] = n
		case "id", "event":
			frame[name] = value
		default:
			return nil, fmt.Errorf("unknown field %q", name)
		}
	}
	return frames, sc.Err()
}

// match finds the route of r in the route table.
func (v *Validator) match(r *http.Request) (*routes.Route, map[string]string) {
	for i := range v.routes {
		rt := &v.routes[i]
		if rt.Method != r.Method {
			continue
		}
		if params, ok := httpapi.MatchPath(rt.Path, r.URL.Path); ok {
			out := make(map[string]string, len(params))
			for k, p := range params {
				out[strings.TrimSuffix(k, "+")] = p
			}
			return rt, out
		}
	}
	return nil, nil
}

func cloneRequest(r *http.Request, body []byte) *http.Request {
	c := r.Clone(context.Background())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	return c
}

// capped keeps the first maxBody bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxBody - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// recorder passes an answer on and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) <= maxBody {
		r.body.Write(p)
	} else {
		r.overflow = true
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController flush the stream.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
