// Command infra is the CDK app of Remote Agents: one stack per environment,
// RemoteAgents-<env>. `-c env=<name>` synthesizes one; without it, dev, staging
// and prod are all synthesized. Other context: allowedOrigins (comma list),
// creationTimeout (seconds), embedFeatures (comma list), sandboxImage (a prebuilt
// image URI) or buildSandboxImage=true (builds sandbox/Dockerfile; needs Docker),
// and the model settings of package models (llmProvider, llmModel,
// bedrockModels; each also as <key>.<env> for one environment), and the API's
// throttling (apiThrottleRate, apiThrottleBurst).
package main

import (
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

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
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
	root, _ := filepath.Abs("..")
	timeout, _ := strconv.Atoi(ctx("creationTimeout"))
	origins, err := config.Origins("allowedOrigins", list(ctx("allowedOrigins")))
	if err != nil {
		return err
	}
	throttle, err := stack.ThrottleFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		return err
	}
	for _, env := range envs {
		settings, err := models.FromContext(env, ctx)
		if err != nil {
			return fmt.Errorf("RemoteAgents-%s: %w", env, err)
		}
		stack.New(app, "RemoteAgents-"+env, stack.Props{
			Env:               env,
			CodeDir:           filepath.Join(root, "dist"),
			DataDir:           filepath.Join(root, "data"),
			RepoDir:           root,
			SandboxImage:      ctx("sandboxImage"),
			BuildSandboxImage: ctx("buildSandboxImage") == "true",
			AllowedOrigins:    origins,
			CreationTimeout:   timeout,
			EmbedFeatures:     list(ctx("embedFeatures")),
			Models:            settings,
			Throttle:          throttle,
		})
	}
	app.Synth(nil)
	return nil
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
