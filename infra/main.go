// Command infra is the CDK app of Remote Agents: one stack per environment,
// RemoteAgents-<env>. `-c env=<name>` synthesizes one; without it, dev, staging
// and prod are all synthesized. Other context: allowedOrigins (comma list),
// creationTimeout (seconds), embedFeatures (comma list), sandboxImage (a prebuilt
// image URI) or buildSandboxImage=true (builds sandbox/Dockerfile; needs Docker),
// orchestratorRoleArn, dailyCostAlarmUSD, the API's throttling (apiThrottleRate,
// apiThrottleBurst) and the model settings of package models (llmProvider,
// llmModel, bedrockModels): each also as <key>.<env>, which wins for that
// environment (allowedOrigins.prod=https://app.example.com). And target (aws,
// the default; sam: the AWS stack with the variables `sam local` overrides;
// localstack: the variant community LocalStack deploys; see package stack).
//
// Run by the CDK CLI or by itself (`go run .`, as make synth does), it starts
// from the same context: cdk.json's, with asset metadata on (what the CLI sets
// by default, and what `sam local` reads to find each function's code); the
// CLI's context and CDK_CONTEXT_JSON win over it.
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/infra/stack"
	"github.com/remote-agents/remote-agents/shared/config"
)

// Environments are synthesized when no env is given.
var Environments = []string{"dev", "staging", "prod"}

// AssetMetadataContext is the context key that makes every asset's resource
// carry aws:asset:path and aws:asset:property (the CDK CLI sets it unless
// --no-asset-metadata); SAM finds a function's code through them.
const AssetMetadataContext = "aws:cdk:enable-asset-metadata"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	defaults, err := Defaults("cdk.json")
	if err != nil {
		return err
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &defaults})
	if err := Build(app, ".."); err != nil {
		return err
	}
	asm := app.Synth(nil)
	// What cdk-nag found and the stack does not accept with a reason stops
	// synth (and so deploy, which synthesizes first).
	findings, err := stack.Findings(*asm.Directory())
	if err != nil {
		return err
	}
	if len(findings) > 0 {
		return fmt.Errorf("%d errors and warnings, cdk-nag's AwsSolutions findings among them (fix each, or accept it with a reason in stack/nag.go):\n  %s",
			len(findings), strings.Join(findings, "\n  "))
	}
	return nil
}

// Defaults is the app's starting context: the context of the CDK config file
// at path (cdk.json), and asset metadata on.
func Defaults(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the CDK config: %w", err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.Context == nil {
		cfg.Context = map[string]any{}
	}
	cfg.Context[AssetMetadataContext] = true
	return cfg.Context, nil
}

// Build adds the stacks the app's context asks for, checked by cdk-nag's
// AwsSolutions pack as they synthesize (stack.Check); root is the repository
// (code from root/dist unless the codeDir context names another folder, the
// guardrails from root/data).
func Build(app awscdk.App, root string) error {
	stack.Check(app)
	ctx := func(key string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok {
			return v
		}
		return ""
	}
	envs := Environments
	if e := ctx("env"); e != "" {
		envs = []string{e}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	code := filepath.Join(root, "dist")
	if d := ctx("codeDir"); d != "" {
		code = d
	}
	target, err := stack.ParseTarget(ctx("target"))
	if err != nil {
		return err
	}
	for _, env := range envs {
		// Each setting may differ per environment: <key>.<env> (in cdk.json's
		// context, or -c on the command line) wins over <key>.
		of := func(key string) string { return cmp.Or(ctx(key+"."+env), ctx(key)) }
		settings, err := models.FromContext(env, ctx)
		if err != nil {
			return fmt.Errorf("RemoteAgents-%s: %w", env, err)
		}
		origins, err := config.Origins("allowedOrigins", list(of("allowedOrigins")))
		if err != nil {
			return fmt.Errorf("RemoteAgents-%s: %w", env, err)
		}
		throttle, err := stack.ThrottleFromContext(func(key string) any {
			if v := app.Node().TryGetContext(jsii.String(key + "." + env)); v != nil {
				return v
			}
			return app.Node().TryGetContext(jsii.String(key))
		})
		if err != nil {
			return fmt.Errorf("RemoteAgents-%s: %w", env, err)
		}
		timeout, _ := strconv.Atoi(of("creationTimeout"))
		stack.New(app, "RemoteAgents-"+env, stack.Props{
			Env:                 env,
			Target:              target,
			CodeDir:             code,
			DataDir:             filepath.Join(root, "data"),
			RepoDir:             root,
			SandboxImage:        of("sandboxImage"),
			BuildSandboxImage:   of("buildSandboxImage") == "true",
			AllowedOrigins:      origins,
			CreationTimeout:     timeout,
			EmbedFeatures:       list(of("embedFeatures")),
			Models:              settings,
			Throttle:            throttle,
			OrchestratorRoleARN: of("orchestratorRoleArn"),
			DailyCostAlarmUSD:   number(of("dailyCostAlarmUSD")),
		})
	}
	return nil
}

// number reads a context value as a number (0 when unset or not one).
func number(v string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0
	}
	return f
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
