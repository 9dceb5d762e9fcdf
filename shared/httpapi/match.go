package httpapi

import (
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

// MatchPath matches a path against a route pattern ("/api/{id}/events") and
// returns the path parameters.
func MatchPath(pattern, path string) (map[string]string, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if xs[i] == "" {
				return nil, false
			}
			params[p[1:len(p)-1]] = xs[i]
			continue
		}
		if p != xs[i] {
			return nil, false
		}
	}
	return params, true
}

func notFound() error { return apierror.New(apierror.NotFound, "No such route.") }

func methodNotAllowed(method string) error {
	return apierror.New(apierror.MethodNotAllowed, "Method %s is not allowed here.", method)
}
