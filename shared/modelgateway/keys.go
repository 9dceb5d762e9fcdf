package modelgateway

import (
	"context"
	"errors"
	"fmt"
)

// Keys holds the providers' API keys.
type Keys interface {
	// Key returns provider's API key. ErrNoKey: the platform holds none for
	// it; any other error: where the key is kept could not be read.
	Key(ctx context.Context, provider string) (string, error)
}

// ErrNoKey says the platform holds no API key for a provider.
var ErrNoKey = errors.New("no API key for the provider")

// EnvKeys are keys in a process's environment (the dev server's), under each
// provider's usual variables (Provider.KeyEnvs); lookup is os.LookupEnv or a
// stand-in.
type EnvKeys func(name string) (string, bool)

// Key returns the value of the first of the provider's variables that is set.
func (e EnvKeys) Key(_ context.Context, provider string) (string, error) {
	p, ok := ProviderNamed(provider)
	if !ok {
		return "", fmt.Errorf("%s: %w", provider, ErrNoKey)
	}
	for _, name := range p.KeyEnvs {
		if v, ok := e(name); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: %w", provider, ErrNoKey)
}

// KeyVariables are the variables every provider's key is kept under in a
// process's environment (what no sandbox may inherit).
func KeyVariables() []string {
	var out []string
	for _, name := range []string{"anthropic", "openai", "gemini", "mistral", "bedrock"} {
		out = append(out, providers[name].KeyEnvs...)
	}
	return out
}

// FirstKey asks each of keys in turn: the first key found wins.
type FirstKey []Keys

// Key returns the first key one of f has for provider.
func (f FirstKey) Key(ctx context.Context, provider string) (string, error) {
	for _, k := range f {
		key, err := k.Key(ctx, provider)
		if !errors.Is(err, ErrNoKey) {
			return key, err
		}
	}
	return "", fmt.Errorf("%s: %w", provider, ErrNoKey)
}
