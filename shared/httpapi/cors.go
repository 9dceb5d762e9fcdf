package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
)

// CORS answers preflight requests and adds CORS headers for allowed origins only.
// A request from any other origin gets no CORS headers at all, so the browser
// blocks it; requests without an Origin (servers, curl) pass through unchanged.
func CORS(allowed []string, methods string, h Handler) Handler {
	return func(ctx context.Context, req Request) (Response, error) {
		origin := Header(req, "Origin")
		ok := origin != "" && slices.Contains(allowed, strings.ToLower(origin))
		if req.RequestContext.HTTP.Method == http.MethodOptions {
			res := Response{StatusCode: http.StatusNoContent, Headers: map[string]string{"Vary": "Origin"}}
			if ok {
				res.Headers["Access-Control-Allow-Origin"] = origin
				res.Headers["Access-Control-Allow-Methods"] = methods + ", OPTIONS"
				res.Headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type, Idempotency-Key"
				res.Headers["Access-Control-Max-Age"] = "600"
			}
			return res, nil
		}
		res, err := h(ctx, req)
		if err != nil {
			return res, err
		}
		if res.Headers == nil {
			res.Headers = map[string]string{}
		}
		res.Headers["Vary"] = "Origin"
		if ok {
			res.Headers["Access-Control-Allow-Origin"] = origin
			res.Headers["Access-Control-Expose-Headers"] = "Retry-After, Idempotent-Replayed"
		}
		return res, nil
	}
}
