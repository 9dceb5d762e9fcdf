package httpapi

import (
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

// MatchPath matches a path against a route pattern ("/api/{id}/events") and
// returns the path parameters. A last segment {name+} is greedy, as in API
// Gateway: it takes the rest of the path, one segment or more, slashes
// included ("/model/{provider}/{proxy+}" gives proxy "v1/messages").
func MatchPath(pattern, path string) (map[string]string, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	greedy := ""
	if last := ps[len(ps)-1]; strings.HasPrefix(last, "{") && strings.HasSuffix(last, "+}") {
		greedy, ps = last[1:len(last)-2], ps[:len(ps)-1]
		if len(xs) <= len(ps) {
			return nil, false
		}
	} else if len(ps) != len(xs) {
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
	if greedy != "" {
		rest := xs[len(ps):]
		for _, x := range rest {
			if x == "" {
				return nil, false
			}
		}
		params[greedy] = strings.Join(rest, "/")
	}
	return params, true
}

func notFound() error { return apierror.New(apierror.NotFound, "No such route.") }

func methodNotAllowed(method string) error {
	return apierror.New(apierror.MethodNotAllowed, "Method %s is not allowed here.", method)
}
