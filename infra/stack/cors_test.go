package stack

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// allowed are the test stacks' allowed origins, as browsers send them: the
// stacks are given "https://App.Example.com/".
var allowed = []string{"https://app.example.com", "http://localhost:5173"}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// TestApiAnswersPreflightsOfTheAllowedOrigins: API Gateway answers the
// preflights of the API's routes (which have no OPTIONS routes) for exactly the
// allowed origins, as the handlers read them, with the handlers' methods,
// headers and max age.
func TestApiAnswersPreflightsOfTheAllowedOrigins(t *testing.T) {
	for env, tp := range synth(t) {
		apis := tp.ofHTTPAPI("AWS::ApiGatewayV2::Api")
		if len(apis) != 1 {
			t.Fatalf("%s: %d HTTP APIs", env, len(apis))
		}
		var cors map[string]any
		for _, api := range apis {
			cors, _ = props(api)["CorsConfiguration"].(map[string]any)
		}
		if cors == nil {
			t.Fatalf("%s: the HTTP API has no CORS configuration", env)
		}
		if got := strs(cors["AllowOrigins"]); !slices.Equal(got, allowed) {
			t.Errorf("%s: AllowOrigins %v, want %v", env, got, allowed)
		}
		// The handlers' own list (RA_ALLOWED_ORIGINS) is the same.
		for _, fn := range tp.byType("AWS::Lambda::Function") {
			e, _ := props(fn)["Environment"].(map[string]any)
			vars, _ := e["Variables"].(map[string]any)
			if v, ok := vars["RA_ALLOWED_ORIGINS"]; ok && v != strings.Join(allowed, ",") {
				t.Errorf("%s: %s has RA_ALLOWED_ORIGINS=%v, API Gateway %v", env, props(fn)["FunctionName"], v, allowed)
			}
		}
		methods := strs(cors["AllowMethods"])
		slices.Sort(methods)
		if want := []string{"GET", "OPTIONS", "PATCH", "POST"}; !slices.Equal(methods, want) {
			t.Errorf("%s: AllowMethods %v, want %v", env, methods, want)
		}
		if got := strs(cors["AllowHeaders"]); !slices.Equal(got, []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID", "X-Session-Token"}) ||
			!slices.Equal(got, routes.CORSAllowHeaders()) {
			t.Errorf("%s: AllowHeaders %v", env, got)
		}
		if got := strs(cors["ExposeHeaders"]); !slices.Equal(got, routes.CORSExposeHeaders()) || !slices.Contains(got, "Retry-After") {
			t.Errorf("%s: ExposeHeaders %v", env, got)
		}
		if cors["MaxAge"] != float64(routes.CORSMaxAge) || cors["AllowCredentials"] == true {
			t.Errorf("%s: MaxAge %v, AllowCredentials %v", env, cors["MaxAge"], cors["AllowCredentials"])
		}
	}
}

// TestBucketTakesUploadsFromTheEmbedView: the embed view, served at the
// public origin (the CloudFront distribution), PUTs attachments to presigned
// URLs of the bucket, and so may pages at the allowed origins.
func TestBucketTakesUploadsFromTheEmbedView(t *testing.T) {
	for env, tp := range synth(t) {
		dists := tp.byType("AWS::CloudFront::Distribution")
		if len(dists) != 1 {
			t.Fatalf("%s: %d distributions", env, len(dists))
		}
		var dist string
		for id := range dists {
			dist = id
		}
		embed := fmt.Sprint(map[string]any{"Fn::Join": []any{"", []any{"https://", map[string]any{"Fn::GetAtt": []any{dist, "DomainName"}}}}})
		_, b := tp.find(t, "AWS::S3::Bucket", "BucketName", tp.stack.Set.Bucket.Name)
		cfg, _ := props(b)["CorsConfiguration"].(map[string]any)
		if cfg == nil {
			t.Fatalf("%s: the bucket has no CORS configuration", env)
		}
		var put map[string]any
		for _, r := range cfg["CorsRules"].([]any) {
			if r := r.(map[string]any); slices.Equal(strs(r["AllowedMethods"]), []string{"PUT"}) {
				put = r
			}
		}
		if put == nil {
			t.Fatalf("%s: no CORS rule for PUT: %v", env, cfg)
		}
		var origins []string
		for _, o := range put["AllowedOrigins"].([]any) {
			origins = append(origins, fmt.Sprint(o))
		}
		if want := append([]string{embed}, allowed...); !slices.Equal(origins, want) {
			t.Errorf("%s: uploads allowed from %v, want the embed view's origin and the allowed ones %v", env, origins, want)
		}
		if got := strs(put["AllowedHeaders"]); !slices.Equal(got, []string{"Content-Type"}) {
			t.Errorf("%s: AllowedHeaders %v", env, got)
		}
	}
}

// TestTemplateHasNoDependencyCycle: CloudFormation refuses a template whose
// resources depend on each other in a circle (the bucket's CORS names the
// distribution, which reaches functions whose policies name the bucket).
func TestTemplateHasNoDependencyCycle(t *testing.T) {
	for env, tp := range synth(t) {
		deps := map[string][]string{}
		for id, r := range tp.res {
			deps[id] = references(r, tp.res)
		}
		const (
			visiting = 1
			done     = 2
		)
		state := map[string]int{}
		var visit func(id string, path []string)
		visit = func(id string, path []string) {
			switch state[id] {
			case visiting:
				t.Fatalf("%s: dependency cycle %v", env, append(path, id))
			case done:
				return
			}
			state[id] = visiting
			for _, d := range deps[id] {
				visit(d, append(path, id))
			}
			state[id] = done
		}
		for id := range tp.res {
			visit(id, nil)
		}
	}
}

// references are the resources v names: Ref, Fn::GetAtt, ${...} in Fn::Sub,
// DependsOn.
func references(v any, res map[string]map[string]any) []string {
	var out []string
	add := func(id string) {
		id, _, _ = strings.Cut(id, ".")
		if _, ok := res[id]; ok {
			out = append(out, id)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Ref":
					add(fmt.Sprint(x))
				case "Fn::GetAtt":
					if ga, ok := x.([]any); ok && len(ga) > 0 {
						add(fmt.Sprint(ga[0]))
					}
				case "DependsOn":
					if s, ok := x.(string); ok {
						add(s)
					}
					if l, ok := x.([]any); ok {
						for _, s := range l {
							add(fmt.Sprint(s))
						}
					}
				case "Fn::Sub":
					s := fmt.Sprint(x)
					for {
						i := strings.Index(s, "${")
						if i < 0 {
							break
						}
						j := strings.Index(s[i:], "}")
						if j < 0 {
							break
						}
						add(s[i+2 : i+j])
						s = s[i+j:]
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}
