// Command providers prints which model providers an environment's deployment
// has a key for. Each key provider's secret (ra-<env>-model-<provider>) is
// looked at with DescribeSecret, which returns no value: no key is ever read,
// let alone printed. Given the outputs of `cdk deploy --outputs-file`, it also
// prints the sandboxes' default model and the Bedrock models the model
// function may invoke, and warns when the default provider has no key.
//
//	go run ./cmd/providers -env dev [-outputs cdk.out/outputs-dev.json]
//
// `make deploy` runs it after deploying; `make providers ENV=…` runs it alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func main() {
	env := flag.String("env", "dev", "the environment")
	outputs := flag.String("outputs", "", "the stack outputs written by cdk deploy --outputs-file (optional)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *env, *outputs); err != nil {
		fmt.Fprintln(os.Stderr, "providers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, env, outputsFile string) error {
	outputs, err := readOutputs(outputsFile, "RemoteAgents-"+env)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	return report(ctx, w, secretsmanager.NewFromConfig(cfg), env, outputs)
}

// readOutputs returns the outputs of stack in path; none when path is empty
// or absent (a deploy writes it; `make synth` clears cdk.out).
func readOutputs(path, stack string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return parseOutputs(f, stack)
}
