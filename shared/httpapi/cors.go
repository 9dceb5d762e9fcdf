package httpapi

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// CORS answers preflight requests and adds CORS headers for allowed origins only.
// A request from any other origin gets no CORS headers at all, so the browser
// blocks it; requests without an Origin (servers, curl) pass through unchanged.
func CORS(allowed []string, methods string, h Handler) Handler {
	return func(ctx context.Context, req Request) (Response, error) {
		if pre, ok := preflight(allowed, methods, req); ok {
			return pre, nil
		}
		res, err := h(ctx, req)
		if err != nil {
			return res, err
		}
		allowOrigin(allowed, req, &res)
		return res, nil
	}
}

// CORSStream is CORS for a streaming route.
func CORSStream(allowed []string, methods string, h StreamHandler) StreamHandler {
	return func(ctx context.Context, req Request) (Response, BodyWriter) {
		if pre, ok := preflight(allowed, methods, req); ok {
			return pre, nil
		}
		res, body := h(ctx, req)
		allowOrigin(allowed, req, &res)
		return res, body
	}
}

// AllowedOrigin reports whether req comes from one of the allowed origins.
func AllowedOrigin(allowed []string, req Request) (string, bool) {
	origin := Header(req, "Origin")
	return origin, origin != "" && slices.Contains(allowed, strings.ToLower(origin))
}

func preflight(allowed []string, methods string, req Request) (Response, bool) {
	if req.RequestContext.HTTP.Method != http.MethodOptions {
		return Response{}, false
	}
	res := Response{StatusCode: http.StatusNoContent, Headers: map[string]string{"Vary": "Origin"}}
	if origin, ok := AllowedOrigin(allowed, req); ok {
		res.Headers["Access-Control-Allow-Origin"] = origin
		res.Headers["Access-Control-Allow-Methods"] = methods + ", OPTIONS"
		res.Headers["Access-Control-Allow-Headers"] = strings.Join(routes.CORSAllowHeaders(), ", ")
		res.Headers["Access-Control-Max-Age"] = strconv.Itoa(routes.CORSMaxAge)
	}
	return res, true
}

func allowOrigin(allowed []string, req Request, res *Response) {
	if res.Headers == nil {
		res.Headers = map[string]string{}
	}
	res.Headers["Vary"] = "Origin"
	if origin, ok := AllowedOrigin(allowed, req); ok {
		res.Headers["Access-Control-Allow-Origin"] = origin
		res.Headers["Access-Control-Expose-Headers"] = strings.Join(routes.CORSExposeHeaders(), ", ")
	}
}

// BodyWriter writes a streamed response body; flush sends what was written so far.
type BodyWriter func(w io.Writer, flush func()) error

// StreamHandler serves a streaming route (Server-Sent Events). It answers like a
// Handler; when it also returns a BodyWriter, the response's status and headers
// go first and the BodyWriter streams the body until it returns.
type StreamHandler func(ctx context.Context, req Request) (Response, BodyWriter)
