// Package httpapi holds what every HTTP route shares: the API Gateway (HTTP API,
// payload 2.0) request and response types, strict JSON decoding with a size bound,
// bearer tokens, error envelopes and CORS. Route handlers stay thin on top of it.
package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

// Request and Response are API Gateway's HTTP API events.
type (
	Request  = events.APIGatewayV2HTTPRequest
	Response = events.APIGatewayV2HTTPResponse
)

// Handler serves one route.
type Handler func(ctx context.Context, req Request) (Response, error)

// MaxBodyBytes bounds a JSON request body unless a route sets its own limit.
const MaxBodyBytes = 64 * 1024

// JSON returns a response with v as its JSON body.
func JSON(status int, v any) Response {
	body, err := json.Marshal(v)
	if err != nil {
		return Error(context.Background(), nil, fmt.Errorf("encode response: %w", err))
	}
	return Response{
		StatusCode: status,
		Headers: map[string]string{
			"Content-Type":           "application/json",
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
		},
		Body: string(body),
	}
}

// Error returns the error envelope for err. Internal errors are logged (when log is
// not nil) and shown to the client only as server_error; outages (a dependency
// unavailable) are logged as warnings, with the cause the client does not see.
func Error(ctx context.Context, log *slog.Logger, err error) Response {
	env := EnvelopeOf(err)
	switch {
	case log == nil:
	case Internal(err):
		log.ErrorContext(ctx, "request failed", slog.String("error", err.Error()))
	case env.ErrorCode == apierror.ServiceUnavailable:
		log.WarnContext(ctx, "service unavailable", slog.String("error", err.Error()))
	}
	res := JSON(env.Status, env)
	if env.RetryAfterSeconds > 0 {
		res.Headers["Retry-After"] = fmt.Sprint(env.RetryAfterSeconds)
	}
	return res
}

// Header returns a request header by name, whatever its case.
func Header(req Request, name string) string {
	v, _ := LookupHeader(req, name)
	return v
}

// LookupHeader returns a request header by name, whatever its case, and
// whether the request has it (empty or not).
func LookupHeader(req Request, name string) (string, bool) {
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Cookie returns the value of the request's cookie name, or "" (API
// Gateway hands the Cookie header over as Request.Cookies).
func Cookie(req Request, name string) string {
	for _, c := range req.Cookies {
		for part := range strings.SplitSeq(c, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && k == name {
				return v
			}
		}
	}
	return ""
}

// BearerToken returns the token of an "Authorization: Bearer …" header, or "".
func BearerToken(req Request) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(Header(req, "Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Body returns the request body, decoded from base64 if API Gateway encoded it,
// refusing more than limit bytes.
func Body(req Request, limit int) ([]byte, error) {
	raw := req.Body
	if len(raw) > base64.StdEncoding.EncodedLen(limit)+4 {
		return nil, tooLarge(limit)
	}
	if !req.IsBase64Encoded {
		if len(raw) > limit {
			return nil, tooLarge(limit)
		}
		return []byte(raw), nil
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, apierror.New(apierror.InvalidRequest, "The request body is not valid base64.")
	}
	if len(b) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

func tooLarge(limit int) error {
	return apierror.New(apierror.PayloadTooLarge, "The request body is larger than %d bytes.", limit)
}

// DecodeJSON decodes the body into v strictly: one JSON object, no unknown fields,
// at most limit bytes. A body declared of another type than JSON is
// unsupported_media_type (415), one over limit payload_too_large (413); the
// other errors are invalid_request with a message that says what is wrong,
// never echoing the input. A body without a Content-Type is read as JSON.
func DecodeJSON(req Request, limit int, v any) error {
	if ct := Header(req, "Content-Type"); ct != "" && !IsJSON(ct) {
		return apierror.New(apierror.UnsupportedMediaType, "The request body must be JSON, sent as Content-Type: application/json.")
	}
	body, err := Body(req, limit)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return apierror.New(apierror.InvalidRequest, "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierror.New(apierror.InvalidRequest, "%s", describeJSONError(err))
	}
	if trimmed[0] != '{' { // null decodes into any v without error
		return apierror.New(apierror.InvalidRequest, "The request body must be a JSON object.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apierror.New(apierror.InvalidRequest, "The request body must hold a single JSON object.")
	}
	return nil
}

// IsJSON reports whether a Content-Type is JSON's: application/json, or a
// type with the +json suffix, with any parameters.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
}

func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var when *time.ParseError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("The request body is not valid JSON (at byte %d).", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "The request body must be a JSON object."
		}
		want := jsonType(typ.Type.Kind().String())
		if k := typ.Type.Kind(); want == "number" && strings.HasPrefix(typ.Value, "number") && k != reflect.Float64 && k != reflect.Float32 {
			// A fraction, or past the field's range, for a whole number.
			return fmt.Sprintf("Field %q must be a whole number in range.", typ.Field)
		}
		return fmt.Sprintf("Field %q must be of type %s.", typ.Field, want)
	case errors.As(err, &when):
		return "A time in the request body is not RFC 3339, such as 2026-12-01T10:00:00Z."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The name is the client's text: not repeated back.
		return "The request body has a field this route does not take."
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The request body is truncated JSON."
	default:
		return "The request body is not valid JSON."
	}
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	default:
		return "number"
	}
}

// Route is one entry of a route table: "METHOD /path/{param}" and its handler.
type Route struct {
	Method  string
	Pattern string
	Handler Handler
	// Stream, instead of Handler, serves a streaming route.
	Stream StreamHandler
	// CORS routes also answer OPTIONS preflights through their handler.
	CORS bool
}

// Key is the route's API Gateway route key, e.g. "GET /sandbox/{sessionId}/spec".
func (r Route) Key() string { return r.Method + " " + r.Pattern }

// DefaultRouteKey is the route key of a request that reached the function
// through its function URL (or an HTTP API's $default route), not a route of
// its own.
const DefaultRouteKey = "$default"

// Router returns one handler for a function's routes: it dispatches on the
// request's route key and answers not_found for any other. A request with the
// DefaultRouteKey (a function URL's: LocalStack's stack variant has no API
// Gateway) is matched as API Gateway would have matched it, by its method and
// path against the routes' patterns, and gets their route key and path
// parameters; a path without a route of its method is method_not_allowed.
func Router(routes []Route) Handler {
	byKey := make(map[string]Handler, len(routes))
	for _, r := range routes {
		byKey[r.Key()] = r.Handler
	}
	return func(ctx context.Context, req Request) (Response, error) {
		if h, ok := byKey[req.RouteKey]; ok {
			return h(ctx, req)
		}
		if req.RouteKey != DefaultRouteKey {
			return Error(ctx, nil, notFound()), nil
		}
		method, pathMatched := req.RequestContext.HTTP.Method, false
		for _, r := range routes {
			params, ok := MatchPath(r.Pattern, req.RawPath)
			if !ok {
				continue
			}
			pathMatched = true
			if method != r.Method && (method != http.MethodOptions || !r.CORS) {
				continue
			}
			req.RouteKey = r.Key()
			req.RequestContext.RouteKey = req.RouteKey
			req.PathParameters = params
			return r.Handler(ctx, req)
		}
		if pathMatched {
			res := Error(ctx, nil, methodNotAllowed(method))
			res.Headers["Allow"] = strings.Join(AllowedMethods(routes, req.RawPath), ", ")
			return res, nil
		}
		return Error(ctx, nil, notFound()), nil
	}
}

// AllowedMethods are the methods routes serve at path, sorted: a 405's
// Allow header.
func AllowedMethods(routes []Route, path string) []string {
	var out []string
	for _, r := range routes {
		if _, ok := MatchPath(r.Pattern, path); ok && !slices.Contains(out, r.Method) {
			out = append(out, r.Method)
			if r.CORS && !slices.Contains(out, http.MethodOptions) {
				out = append(out, http.MethodOptions)
			}
		}
	}
	slices.Sort(out)
	return out
}
