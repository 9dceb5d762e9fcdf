package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/remote-agents/remote-agents/infra/models"
)

// DescribeSecretAPI is the one Secrets Manager call the report makes. It
// returns a secret's metadata, never its value.
type DescribeSecretAPI interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
}

// A secret's state.
const (
	stateSet     = "set"
	stateEmpty   = "empty"
	stateMissing = "missing"
)

// state returns whether name holds a value: a version is AWSCURRENT.
func state(ctx context.Context, api DescribeSecretAPI, name string) (string, error) {
	out, err := api.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &name})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return stateMissing, nil
	case err != nil:
		return "", fmt.Errorf("describe secret %s: %w", name, err)
	}
	for _, stages := range out.VersionIdsToStages {
		if slices.Contains(stages, "AWSCURRENT") {
			return stateSet, nil
		}
	}
	return stateEmpty, nil
}

// report writes each key provider's state in env, with what to do about it,
// then (from the stack's outputs, when given) Bedrock's models and the
// sandboxes' default model.
func report(ctx context.Context, w io.Writer, api DescribeSecretAPI, env string, out map[string]string) error {
	states := map[string]string{}
	for _, p := range models.KeyProviders {
		st, err := state(ctx, api, models.SecretName(env, p))
		if err != nil {
			return err
		}
		states[p] = st
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "Model providers of RemoteAgents-%s (keys in Secrets Manager; no value is read):\n", env)
	for _, p := range models.KeyProviders {
		name := models.SecretName(env, p)
		what := name
		switch states[p] {
		case stateEmpty:
			what = "no key: aws secretsmanager put-secret-value --secret-id " + name + " --secret-string \"$" + strings.ToUpper(p) + "_API_KEY\""
		case stateMissing:
			what = name + " does not exist: deploy the stack first (make deploy ENV=" + env + ")"
		}
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", p, states[p], what)
	}
	if out != nil {
		if bedrock := out[models.OutputBedrock]; bedrock != "" {
			_, _ = fmt.Fprintf(tw, "  bedrock\trole\tthe model function may invoke %s (with model access granted in the Bedrock console)\n", strings.ReplaceAll(bedrock, ",", ", "))
		} else {
			_, _ = fmt.Fprintf(tw, "  bedrock\tnone\tno Bedrock model granted (context %s)\n", models.BedrockKey)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	provider := out[models.OutputProvider]
	if provider == "" {
		return nil
	}
	_, _ = fmt.Fprintf(w, "Sandboxes default to %s %s.\n", provider, out[models.OutputModel])
	if st, ok := states[provider]; ok && st != stateSet {
		_, _ = fmt.Fprintf(w, "Warning: %s has no key, so the sandboxes' model calls fail until it is put in %s.\n", provider, models.SecretName(env, provider))
	}
	return nil
}

// parseOutputs reads stack's outputs from the JSON cdk deploy --outputs-file
// writes: {"<stack>": {"<output>": "<value>", …}}.
func parseOutputs(r io.Reader, stack string) (map[string]string, error) {
	var all map[string]map[string]string
	if err := json.NewDecoder(r).Decode(&all); err != nil {
		return nil, fmt.Errorf("read stack outputs: %w", err)
	}
	return all[stack], nil
}
