package stack

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// render writes a template value as a string: references as ${Name},
// attributes as ${Name.Attribute}, joins joined, selections and splits as
// select(i, …) and split("sep", …).
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			return "${" + r + "}"
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			return fmt.Sprintf("${%v.%v}", ga[0], ga[1])
		}
		if sel, ok := x["Fn::Select"].([]any); ok && len(sel) == 2 {
			return fmt.Sprintf("select(%v, %s)", sel[0], render(sel[1]))
		}
		if sp, ok := x["Fn::Split"].([]any); ok && len(sp) == 2 {
			return fmt.Sprintf("split(%q, %s)", sp[0], render(sp[1]))
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	return fmt.Sprint(v)
}

// functionIDs maps the logical id of each named function to its short name
// ("model" for ra-dev-model).
func (tp *template) functionIDs() map[string]string {
	out := map[string]string{}
	for id, r := range tp.byType("AWS::Lambda::Function") {
		if name, ok := props(r)["FunctionName"].(string); ok {
			out[id] = strings.TrimPrefix(name, "ra-"+tp.stack.Set.Env+"-")
		}
	}
	return out
}

// roleNames names each role: by its function's short name ("model"), else by
// its logical id.
func (tp *template) roleNames() map[string]string {
	out := map[string]string{}
	for id := range tp.byType("AWS::IAM::Role") {
		out[id] = id
	}
	for id, name := range tp.functionIDs() {
		out[ref(props(tp.res[id])["Role"])] = name
	}
	return out
}

// grantsOf returns, for every role, the statements whose actions start with
// prefix, rendered as "action,… on resource [if condition]".
func (tp *template) grantsOf(prefix string) map[string][]string {
	names := tp.roleNames()
	out := map[string][]string{}
	for _, pol := range tp.byType("AWS::IAM::Policy") {
		p := props(pol)
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			actions := list(st["Action"])
			if !slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, prefix) }) {
				continue
			}
			resources, ok := st["Resource"].([]any)
			if !ok {
				resources = []any{st["Resource"]}
			}
			cond := ""
			if c, ok := st["Condition"].(map[string]any); ok {
				for op, kv := range c {
					for k, v := range kv.(map[string]any) {
						cond += fmt.Sprintf(" if %s %s %s", op, k, render(v))
					}
				}
			}
			for _, role := range p["Roles"].([]any) {
				for _, r := range resources {
					out[names[ref(role)]] = append(out[names[ref(role)]], strings.Join(actions, ",")+" on "+render(r)+cond)
				}
			}
		}
	}
	for _, g := range out {
		slices.Sort(g)
	}
	return out
}

// Each provider's key has a secret per environment, created with no value in
// the template (neither a value nor a generated one), kept with prod's data.
func TestModelSecretsAreCreatedEmpty(t *testing.T) {
	for env, tp := range synth(t) {
		secrets := tp.byType("AWS::SecretsManager::Secret")
		var names []string
		for id, r := range secrets {
			p := props(r)
			if p["Name"] == "ra/"+env+"/egress-ca" || p["Name"] == "ra/"+env+"/e2b-token" {
				continue // generated: the egress proxy's, the envd tokens' (TestEgressCASecretIsTheProxysAlone, TestE2BTokenSecret)
			}
			names = append(names, p["Name"].(string))
			for _, key := range []string{"SecretString", "GenerateSecretString", "SecretBinary"} {
				if _, ok := p[key]; ok {
					t.Errorf("%s: secret %s has %s", env, id, key)
				}
			}
			policy := "Delete"
			if env == "prod" {
				policy = "Retain"
			}
			if r["DeletionPolicy"] != policy || r["UpdateReplacePolicy"] != policy {
				t.Errorf("%s: secret %s deletion %v, replacement %v; want %s", env, id, r["DeletionPolicy"], r["UpdateReplacePolicy"], policy)
			}
		}
		slices.Sort(names)
		want := []string{"ra-" + env + "-model-anthropic", "ra-" + env + "-model-gemini", "ra-" + env + "-model-mistral", "ra-" + env + "-model-openai"}
		if !slices.Equal(names, want) {
			t.Errorf("%s: secrets %v, want %v", env, names, want)
		}
	}
}

// The model function, and nothing else (no other function, not the sandbox's
// task or execution role), may read the secrets; it reads exactly them, named
// by its RA_MODEL_SECRET_<PROVIDER> variables.
func TestOnlyTheModelFunctionReadsTheSecrets(t *testing.T) {
	for env, tp := range synth(t) {
		ids := map[string]string{} // provider → secret's logical id
		for id, r := range tp.byType("AWS::SecretsManager::Secret") {
			ids[strings.TrimPrefix(props(r)["Name"].(string), "ra-"+env+"-model-")] = id
		}
		model := map[string]bool{}
		for _, p := range models.KeyProviders {
			model["${"+ids[p]+"}"] = true
		}
		var want []string
		for _, p := range models.KeyProviders {
			want = append(want, "secretsmanager:GetSecretValue on ${"+ids[p]+"}")
		}
		slices.Sort(want)
		grants := tp.grantsOf("secretsmanager:")
		if got := grants["model"]; !slices.Equal(got, want) {
			t.Errorf("%s: the model function may %v, want %v", env, got, want)
		}
		// Others may keep or read other secrets (the apps', the egress
		// proxy's authority), never a provider's key.
		for role, got := range grants {
			for _, g := range got {
				if _, on, _ := strings.Cut(g, " on "); role != "model" && (model[on] || strings.Contains(on, "model")) {
					t.Errorf("%s: %s may %v", env, role, g)
				}
			}
		}
		for id, fn := range tp.functionIDs() {
			vars, _ := props(tp.res[id])["Environment"].(map[string]any)["Variables"].(map[string]any)
			for _, p := range models.KeyProviders {
				v, ok := vars[models.SecretVariable(p)]
				switch {
				case fn == "model" && render(v) != "${"+ids[p]+"}":
					t.Errorf("%s: the model function's %s is %v, want its secret %s", env, models.SecretVariable(p), v, ids[p])
				case fn != "model" && ok:
					t.Errorf("%s: %s has %s", env, fn, models.SecretVariable(p))
				}
			}
		}
	}
}

// Bedrock may be invoked by the model function alone, only on the models the
// context names: a foundation model in the stack's Region, a profile in the
// stack's Region and account, and the models a profile routes to only through
// it. An environment naming none grants none.
func TestBedrockOnlyForTheModelFunctionOnItsModels(t *testing.T) {
	invoke := "bedrock:InvokeModel,bedrock:InvokeModelWithResponseStream on "
	profile := func(id string) string {
		return "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/" + id
	}
	through := func(id string) string { return " if StringLike bedrock:InferenceProfileArn " + profile(id) }
	sonnet, haiku := "anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-haiku-4-5-20251001-v1:0"
	want := map[string][]string{
		"dev": {
			invoke + profile("us."+sonnet),
			invoke + profile("global."+haiku),
			invoke + "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-pro-v1:0",
			invoke + "arn:${AWS::Partition}:bedrock:*::foundation-model/" + sonnet + through("us."+sonnet),
			invoke + "arn:${AWS::Partition}:bedrock:*::foundation-model/" + haiku + through("global."+haiku),
			invoke + "arn:${AWS::Partition}:bedrock:::foundation-model/" + haiku + through("global."+haiku),
		},
		"prod": nil,
	}
	for env, tp := range synth(t) {
		grants := tp.grantsOf("bedrock:")
		w := slices.Clone(want[env])
		slices.Sort(w)
		if got := grants["model"]; !slices.Equal(got, w) {
			t.Errorf("%s: the model function may\n  %s\nwant\n  %s", env, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
		for role, got := range grants {
			if role != "model" {
				t.Errorf("%s: %s may %v", env, role, got)
			}
		}
	}
}

// Every streaming route is its function's URL with response streaming, behind
// CloudFront at its path: the model route's (a POST with the sandbox token in
// its headers) takes any caller, as the API does, and its handler
// authenticates; a GET stream is reached signed (origin access control). Every
// other path, the rest of /sandbox/* among them, goes to the API. Sandboxes get
// that origin as their gateway.
func TestStreamingRoutesAreFunctionURLsBehindCloudFront(t *testing.T) {
	tp := synth(t)["dev"]
	fns := tp.functionIDs()
	urls := map[string]map[string]any{} // URL's logical id → properties
	for id, u := range tp.byType("AWS::Lambda::Url") {
		urls[id] = props(u)
	}
	var dist map[string]any
	var distID string
	for id, d := range tp.byType("AWS::CloudFront::Distribution") {
		distID, dist = id, props(d)["DistributionConfig"].(map[string]any)
	}
	origins := map[string]string{} // origin id → what it reaches ("api", or a function)
	signed := map[string]bool{}
	for _, o := range dist["Origins"].([]any) {
		o := o.(map[string]any)
		domain := render(o["DomainName"])
		switch {
		case strings.Contains(domain, "ApiEndpoint"):
			origins[o["Id"].(string)] = "api"
		default:
			for id, u := range urls {
				if strings.Contains(domain, "${"+id+".FunctionUrl}") {
					origins[o["Id"].(string)] = fns[ref(u["TargetFunctionArn"])]
				}
			}
		}
		signed[o["Id"].(string)] = o["OriginAccessControlId"] != nil
	}
	behaviors := map[string]string{} // path pattern → origin id
	var patterns []string
	for _, b := range dist["CacheBehaviors"].([]any) {
		b := b.(map[string]any)
		behaviors[b["PathPattern"].(string)] = b["TargetOriginId"].(string)
		patterns = append(patterns, b["PathPattern"].(string))
	}
	if got := origins[dist["DefaultCacheBehavior"].(map[string]any)["TargetOriginId"].(string)]; got != "api" {
		t.Errorf("CloudFront's default goes to %q, want the API", got)
	}

	streamFns := map[string]bool{}
	for _, r := range tp.stack.Routes {
		// Where CloudFront sends a request on this route: the first behavior
		// whose pattern matches, else the default.
		path := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(r.Path, "x1")
		if strings.HasSuffix(r.Path, "+}") {
			path += "/v1/messages"
		}
		origin := dist["DefaultCacheBehavior"].(map[string]any)["TargetOriginId"].(string)
		for _, pattern := range patterns {
			if cloudFrontMatch(pattern, path) {
				origin = behaviors[pattern]
				break
			}
		}
		want := "api"
		if r.Stream && r.Internal {
			// Not through CloudFront: its own URL (IAM), the orchestrator's.
			streamFns[r.Function] = true
		} else if r.Stream {
			want = r.Function
			streamFns[r.Function] = true
			if signed[origin] != (r.Method == "GET") {
				t.Errorf("%s: CloudFront signs its requests: %v", r.Key(), signed[origin])
			}
		}
		if origins[origin] != want {
			t.Errorf("%s (%s) goes to %q, want %q", r.Key(), path, origins[origin], want)
		}
	}
	if !streamFns["model"] || !streamFns["events"] || !streamFns["joblogs"] {
		t.Fatalf("streaming functions %v: the table lacks the model, events or job log stream route", streamFns)
	}
	for id, u := range urls {
		fn := fns[ref(u["TargetFunctionArn"])]
		wantAuth := "NONE"
		if fn == "events" || fn == "joblogs" {
			wantAuth = "AWS_IAM"
		}
		if !streamFns[fn] || u["InvokeMode"] != "RESPONSE_STREAM" || u["AuthType"] != wantAuth {
			t.Errorf("URL %s of %s: %v, want response streaming, auth %s", id, fn, u, wantAuth)
		}
		delete(streamFns, fn)
	}
	if len(streamFns) > 0 {
		t.Errorf("streaming functions without a URL: %v", slices.Collect(maps.Keys(streamFns)))
	}
	for id, fn := range fns {
		if fn == "model" || fn == "events" {
			if timeout := props(tp.res[id])["Timeout"]; timeout != float64(900) {
				t.Errorf("%s: timeout %v, want 900 s", fn, timeout)
			}
		}
		if fn == routes.JobWorker || fn == ToolWorker {
			vars := props(tp.res[id])["Environment"].(map[string]any)["Variables"].(map[string]any)
			if got := render(vars["RA_GATEWAY_URL"]); got != "https://${"+distID+".DomainName}" {
				t.Errorf("%s: RA_GATEWAY_URL %s, want CloudFront's", fn, got)
			}
		}
	}
}

// cloudFrontMatch reports whether a CloudFront path pattern matches path:
// '*' matches any characters, '?' one.
func cloudFrontMatch(pattern, path string) bool {
	re := regexp.QuoteMeta(pattern)
	re = strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(re)
	return regexp.MustCompile("^" + re + "$").MatchString(path)
}

// secretLike are names of variables that would hold a secret.
var secretLike = regexp.MustCompile(`(?i)KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|BOOTSTRAP`)

// The sandbox's task definition says which model sandboxes use, from the
// context, and holds nothing secret: no provider key, no token, no secret
// reference.
func TestSandboxTaskGetsItsModelAndNoSecret(t *testing.T) {
	for env, tp := range synth(t) {
		tasks := tp.byType("AWS::ECS::TaskDefinition")
		for id, td := range tasks {
			if props(td)["Family"] != "ra-"+env+"-sandbox" {
				delete(tasks, id) // the egress proxy's: a platform process
			}
		}
		if len(tasks) != 1 {
			t.Fatalf("%s: %d sandbox task definitions", env, len(tasks))
		}
		for _, task := range tasks {
			for _, c := range props(task)["ContainerDefinitions"].([]any) {
				c := c.(map[string]any)
				got := map[string]string{}
				envs, _ := c["Environment"].([]any)
				for _, e := range envs {
					e := e.(map[string]any)
					got[e["Name"].(string)] = render(e["Value"])
					if secretLike.MatchString(e["Name"].(string)) {
						t.Errorf("%s: the task definition has %s", env, e["Name"])
					}
				}
				want := map[string]string{"RA_LLM_PROVIDER": settings[env].Provider, "RA_LLM_MODEL": settings[env].Model, "RA_TOOL_USER": SandboxToolUser, "RA_SANDBOX_DEDICATED": "1"}
				if !maps.Equal(got, want) {
					t.Errorf("%s: the sandbox's environment %v, want %v", env, got, want)
				}
				// The agent is root and not dumpable; its commands run as the
				// tool user, and nothing may trace it.
				if c["User"] != "0" || c["LinuxParameters"] != nil || c["Privileged"] != nil {
					t.Errorf("%s: the sandbox container runs as %v, linux parameters %v, privileged %v; want root, none, no", env, c["User"], c["LinuxParameters"], c["Privileged"])
				}
				for _, key := range []string{"Secrets", "EnvironmentFiles"} {
					if c[key] != nil {
						t.Errorf("%s: the sandbox container has %s: %v", env, key, c[key])
					}
				}
			}
		}
	}
}

// A stack whose route table has no model route, or whose model settings a
// sandbox could not use, is refused before anything is built.
func TestStackRefusesWhatSandboxesCouldNotUse(t *testing.T) {
	withoutModel := slices.DeleteFunc(routeTable(), func(r routes.Route) bool { return strings.HasPrefix(r.Path, ModelRoutePrefix) })
	unstreamed := slices.Clone(withoutModel)
	unstreamed = append(unstreamed, routes.Route{Method: "POST", Path: modelRoute.Path, Function: "model"})
	tests := []struct {
		name  string
		props Props
		want  string
	}{
		{"no model route", Props{Env: "dev", Routes: withoutModel, Models: settings["prod"]}, "no model route"},
		{"a model route that does not stream", Props{Env: "dev", Routes: unstreamed, Models: settings["prod"]}, "must stream"},
		{"no provider", Props{Env: "dev", Routes: routeTable()}, "sandboxes need a model provider"},
		{"bedrock without models", Props{Env: "dev", Routes: routeTable(), Models: models.Settings{Provider: "bedrock"}}, "the Bedrock models it may invoke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tt.want) {
					t.Errorf("panic %v, want one saying %q", r, tt.want)
				}
			}()
			New(awscdk.NewApp(nil), "RemoteAgents-refused", tt.props)
		})
	}
}

func TestPathPattern(t *testing.T) {
	for _, tt := range []struct{ input, want string }{
		{"/api/remote_agents/{id}/events", "/api/remote_agents/*/events"},
		{"/sandbox/{sessionId}/model/{provider}/{proxy+}", "/sandbox/*/model/*"},
		{"/embed/{id}", "/embed/*"},
		{"/api/remote_agents/create", "/api/remote_agents/create"},
	} {
		if got := PathPattern(tt.input); got != tt.want {
			t.Errorf("PathPattern(%q) = %q, want %q", tt.input, got, tt.want)
		}
	}
}
