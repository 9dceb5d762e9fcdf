package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/infra/stack"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// cfn is a synthesized template as SAM reads it: the file in the cloud
// assembly, next to its staged assets.
type cfn struct {
	dir       string // the cloud assembly
	Resources map[string]struct {
		Type       string
		Properties map[string]any
		Metadata   map[string]any
	}
}

var (
	synthOnce sync.Once
	synthed   map[string]*cfn
	synthErr  error
)

// synthTargets synthesizes dev as the app does (cdk.json's context, the
// app's defaults) for the aws and sam targets, with code zips holding a
// bootstrap, each into its own cloud assembly.
func synthTargets(t *testing.T) map[string]*cfn {
	t.Helper()
	synthOnce.Do(func() {
		synthed = map[string]*cfn{}
		dir, err := os.MkdirTemp("", "ra-infra-")
		if err != nil {
			synthErr = err
			return
		}
		code := filepath.Join(dir, "dist")
		if synthErr = codeZips(code); synthErr != nil {
			return
		}
		for _, target := range []string{"aws", "sam"} {
			ctx, err := Defaults("cdk.json")
			if err != nil {
				synthErr = err
				return
			}
			ctx["env"], ctx["target"], ctx["codeDir"] = "dev", target, code
			out := filepath.Join(dir, "cdk.out-"+target)
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: &ctx})
			if synthErr = Build(app, ".."); synthErr != nil {
				return
			}
			app.Synth(nil)
			b, err := os.ReadFile(filepath.Join(out, "RemoteAgents-dev.template.json"))
			if err != nil {
				synthErr = err
				return
			}
			c := &cfn{dir: out}
			if synthErr = json.Unmarshal(b, c); synthErr != nil {
				return
			}
			synthed[target] = c
		}
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthed
}

// codeZips writes dist/<function>.zip as make build does: one executable
// named bootstrap.
func codeZips(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, fn := range routes.Functions() {
		f, err := os.Create(filepath.Join(dir, fn+".zip"))
		if err != nil {
			return err
		}
		z := zip.NewWriter(f)
		h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := z.CreateHeader(h)
		if err == nil {
			_, err = w.Write([]byte("#!/bin/sh\n"))
		}
		if err == nil {
			err = z.Close()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// functions returns the template's functions of Remote Agents (not CDK's
// helpers): logical id → function name.
func (c *cfn) functions() map[string]string {
	out := map[string]string{}
	for id, r := range c.Resources {
		if name, _ := r.Properties["FunctionName"].(string); r.Type == "AWS::Lambda::Function" && strings.HasPrefix(name, "ra-dev-") {
			out[id] = strings.TrimPrefix(name, "ra-dev-")
		}
	}
	return out
}

// variables returns what a function declares in its environment.
func (c *cfn) variables(id string) map[string]any {
	env, _ := c.Resources[id].Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// getAtt returns the logical id an Fn::GetAtt or Ref names.
func getAtt(v any) string {
	m, _ := v.(map[string]any)
	if s, ok := m["Ref"].(string); ok {
		return s
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
		s, _ := ga[0].(string)
		return s
	}
	return ""
}

// Every function in what make synth writes (the CLI's context: asset
// metadata on) has what `sam local` needs to run it: its code's asset path in
// the cloud assembly (a zip holding an executable bootstrap), the
// provided.al2023 runtime and the bootstrap handler.
func TestSynthesizedFunctionsRunUnderSAM(t *testing.T) {
	for target, c := range synthTargets(t) {
		fns := c.functions()
		if len(fns) != len(routes.Functions())+1 { // and the tool worker
			t.Errorf("%s: functions %v", target, slices.Sorted(maps.Values(fns)))
		}
		for id, r := range c.Resources {
			if r.Type != "AWS::Lambda::Function" {
				continue
			}
			path, _ := r.Metadata["aws:asset:path"].(string)
			if path == "" || r.Metadata["aws:asset:property"] != "Code" {
				t.Errorf("%s: %s has no asset metadata (SAM cannot find its code): %v", target, id, r.Metadata)
				continue
			}
			if _, err := os.Stat(filepath.Join(c.dir, path)); err != nil {
				t.Errorf("%s: %s: asset %s: %v", target, id, path, err)
			}
			if _, ours := fns[id]; !ours {
				continue // CDK's own helpers (bucket deployment, auto-delete)
			}
			if r.Properties["Runtime"] != "provided.al2023" || r.Properties["Handler"] != "bootstrap" {
				t.Errorf("%s: %s: runtime %v handler %v", target, fns[id], r.Properties["Runtime"], r.Properties["Handler"])
			}
			if !hasBootstrap(t, filepath.Join(c.dir, path)) {
				t.Errorf("%s: %s: asset %s holds no executable bootstrap", target, fns[id], path)
			}
		}
	}
}

func hasBootstrap(t *testing.T, path string) bool {
	t.Helper()
	if st, err := os.Stat(filepath.Join(path, "bootstrap")); err == nil {
		return st.Mode()&0o111 != 0
	}
	z, err := zip.OpenReader(path)
	if err != nil {
		return false
	}
	defer func() { _ = z.Close() }()
	for _, f := range z.File {
		if f.Name == "bootstrap" {
			return f.Mode()&0o111 != 0
		}
	}
	return false
}

// Every route `sam local start-api` serves (the API's) runs its function; the
// streaming routes are function URLs, which it does not serve, as docs/local.md
// says.
func TestEveryRouteMapsToAFunctionUnderSAM(t *testing.T) {
	c := synthTargets(t)["sam"]
	fns := c.functions()
	integrations := map[string]string{}
	urls := map[string]string{} // function → invoke mode
	for id, r := range c.Resources {
		switch r.Type {
		case "AWS::ApiGatewayV2::Integration":
			integrations[id] = fns[getAtt(r.Properties["IntegrationUri"])]
		case "AWS::Lambda::Url":
			urls[fns[getAtt(r.Properties["TargetFunctionArn"])]], _ = r.Properties["InvokeMode"].(string)
		}
	}
	served := map[string]string{}
	for _, r := range c.Resources {
		if r.Type != "AWS::ApiGatewayV2::Route" {
			continue
		}
		target := r.Properties["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)
		served[r.Properties["RouteKey"].(string)] = integrations[getAtt(target[1])]
	}
	page, err := os.ReadFile("../docs/local.md")
	if err != nil {
		t.Fatal(err)
	}
	section := between(string(page), "## sam local", "\n## ")
	for _, r := range routes.All() {
		if !r.Stream {
			if served[r.Key()] != r.Function {
				t.Errorf("%s: on the API to %q, want %s", r.Key(), served[r.Key()], r.Function)
			}
			continue
		}
		if urls[r.Function] != "RESPONSE_STREAM" {
			t.Errorf("%s: %s has no streaming function URL", r.Key(), r.Function)
		}
		if !strings.Contains(section, "`"+r.Key()+"`") {
			t.Errorf("docs/local.md's sam local section does not say that `%s` is not served", r.Key())
		}
	}
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	if j := strings.Index(s, end); j >= 0 {
		s = s[:j]
	}
	return s
}

// localstack/sam-env.json overrides only what the SAM template declares (SAM
// drops the rest): its Parameters on every function, a function's own
// section (by logical id) on that function. Its Parameters set every
// variable of stack.SAMVariables: SAM would otherwise take the shell's
// value of a declared variable over the template's. The AWS template declares none of
// the variables Lambda reserves.
func TestSAMEnvOverridesOnlyDeclaredVariables(t *testing.T) {
	b, err := os.ReadFile("../localstack/sam-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var envFile map[string]map[string]string
	if err := json.Unmarshal(b, &envFile); err != nil {
		t.Fatal(err)
	}
	c := synthTargets(t)["sam"]
	fns := c.functions()
	if len(envFile["Parameters"]) == 0 {
		t.Error("sam-env.json has no Parameters")
	}
	for _, key := range slices.Sorted(maps.Keys(stack.SAMVariables)) {
		if _, ok := envFile["Parameters"][key]; !ok {
			t.Errorf("sam-env.json's Parameters lack %s", key)
		}
	}
	for section, vars := range envFile {
		ids := slices.Collect(maps.Keys(fns))
		if section != "Parameters" {
			if _, ok := fns[section]; !ok {
				t.Errorf("sam-env.json: %s is not the logical id of a function", section)
				continue
			}
			ids = []string{section}
		}
		for _, id := range ids {
			declared := c.variables(id)
			for key := range vars {
				if _, ok := declared[key]; !ok {
					t.Errorf("sam-env.json %s.%s: %s does not declare it, so SAM would drop it", section, key, fns[id])
				}
			}
		}
	}
	aws := synthTargets(t)["aws"]
	for id, fn := range aws.functions() {
		for key := range aws.variables(id) {
			if strings.HasPrefix(key, "AWS_") {
				t.Errorf("aws: %s declares %s (reserved, or an endpoint override on AWS)", fn, key)
			}
		}
	}
}

// TestSynthRefusesNagFindings: the app checks its stacks with cdk-nag as it
// synthesizes. The aws and sam targets synthesize without a finding; a
// bucket that allows plain HTTP and keeps no access log, checked the same
// way, is found (what synth then refuses).
func TestSynthRefusesNagFindings(t *testing.T) {
	for target, c := range synthTargets(t) {
		if findings, err := stack.Findings(c.dir); err != nil || len(findings) > 0 {
			t.Errorf("%s: %v\n  %s", target, err, strings.Join(findings, "\n  "))
		}
	}
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack.Check(app)
	st := awscdk.NewStack(app, jsii.String("Careless"), nil)
	awss3.NewBucket(st, jsii.String("Open"), nil)
	app.Synth(nil)
	findings, err := stack.Findings(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(findings, func(f string) bool { return strings.Contains(f, "AwsSolutions-S10") }) {
		t.Errorf("a bucket without SSL enforcement: findings %v, want AwsSolutions-S10", findings)
	}
}

// TestSettingsDifferPerEnvironment: a setting given as <key>.<env> wins for
// that environment, and the plain key holds for the others.
func TestSettingsDifferPerEnvironment(t *testing.T) {
	code := filepath.Join(t.TempDir(), "dist")
	if err := codeZips(code); err != nil {
		t.Fatal(err)
	}
	origins := map[string]string{}
	for _, env := range []string{"dev", "prod"} {
		ctx, err := Defaults("cdk.json")
		if err != nil {
			t.Fatal(err)
		}
		ctx["env"], ctx["codeDir"] = env, code
		ctx["allowedOrigins"], ctx["allowedOrigins.prod"] = "https://staging.example.com", "https://app.example.com"
		ctx["creationTimeout.prod"] = "25"
		out := filepath.Join(t.TempDir(), "cdk.out")
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: &ctx})
		if err := Build(app, ".."); err != nil {
			t.Fatal(err)
		}
		app.Synth(nil)
		b, err := os.ReadFile(filepath.Join(out, "RemoteAgents-"+env+".template.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c cfn
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Resources {
			envProp, _ := r.Properties["Environment"].(map[string]any)
			vars, _ := envProp["Variables"].(map[string]any)
			if o, ok := vars["RA_ALLOWED_ORIGINS"].(string); ok {
				origins[env] = o + " timeout " + fmt.Sprint(vars["RA_CREATION_TIMEOUT_SECONDS"])
			}
		}
	}
	if !strings.Contains(origins["dev"], "https://staging.example.com") || strings.Contains(origins["dev"], "app.example.com") {
		t.Errorf("dev's origins: %q", origins["dev"])
	}
	if !strings.Contains(origins["prod"], "https://app.example.com") || strings.Contains(origins["prod"], "staging") || !strings.Contains(origins["prod"], "timeout 25") {
		t.Errorf("prod's origins and timeout: %q", origins["prod"])
	}
}

// flagExceptions are the CDK feature flags cdk.json deliberately leaves
// at another value than aws-cdk-lib recommends, each with why: none.
var flagExceptions = map[string]string{}

// TestFeatureFlagsAreCurrent: every feature flag aws-cdk-lib reports (its
// feature-flag report in the cloud assembly) is at its recommended value in
// the app as synthesized, set in cdk.json or by default, but those
// flagExceptions names.
func TestFeatureFlagsAreCurrent(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(synthTargets(t)["aws"].dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Artifacts map[string]struct {
			Type       string `json:"type"`
			Properties struct {
				Flags map[string]struct {
					Recommended  any            `json:"recommendedValue"`
					User         any            `json:"userValue"`
					Unconfigured map[string]any `json:"unconfiguredBehavesLike"`
				} `json:"flags"`
			} `json:"properties"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, art := range m.Artifacts {
		if art.Type != "cdk:feature-flag-report" {
			continue
		}
		for name, f := range art.Properties.Flags {
			n++
			got := f.User
			if got == nil {
				got = f.Unconfigured["v2"]
			}
			if fmt.Sprint(got) != fmt.Sprint(f.Recommended) && flagExceptions[name] == "" {
				t.Errorf("%s is %v, recommended %v: set it in cdk.json, or say why not in flagExceptions", name, got, f.Recommended)
			}
		}
	}
	if n < 50 {
		t.Errorf("the feature-flag report has %d flags", n)
	}
}
