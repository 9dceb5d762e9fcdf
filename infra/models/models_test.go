package models

import (
	"slices"
	"strings"
	"testing"
)

func context(values map[string]string) func(string) string {
	return func(key string) string { return values[key] }
}

func TestFromContext(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		ctx     map[string]string
		want    Settings
		wantErr string
	}{
		{"every environment", "dev",
			map[string]string{"llmProvider": "bedrock", "llmModel": "claude-sonnet-4.5", "bedrockModels": " us.anthropic.claude-sonnet-4-5-20250929-v1:0 , amazon.nova-pro-v1:0,"},
			Settings{Provider: "bedrock", Model: "claude-sonnet-4.5", Bedrock: []string{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0"}}, ""},
		{"the environment's own value wins", "prod",
			map[string]string{"llmProvider": "bedrock", "llmProvider.prod": "anthropic", "llmModel": "claude-sonnet-4.5", "llmModel.prod": "claude-opus-4.5", "llmModel.dev": "x", "bedrockModels": "amazon.nova-pro-v1:0"},
			Settings{Provider: "anthropic", Model: "claude-opus-4.5", Bedrock: []string{"amazon.nova-pro-v1:0"}}, ""},
		{"a blank environment value keeps the common one", "staging",
			map[string]string{"llmProvider": "openai", "llmProvider.staging": " "},
			Settings{Provider: "openai"}, ""},
		{"no provider", "dev", map[string]string{"llmModel": "gpt-5"}, Settings{}, "sandboxes need a model provider"},
		{"a local server is not reachable from a sandbox", "dev", map[string]string{"llmProvider": "ollama"}, Settings{}, `"ollama" is not a provider a deployed sandbox can use`},
		{"bedrock without models", "dev", map[string]string{"llmProvider": "bedrock"}, Settings{}, "needs the Bedrock models it may invoke"},
		{"a bad Bedrock ID", "dev", map[string]string{"llmProvider": "anthropic", "bedrockModels": "claude sonnet"}, Settings{}, "is not a Bedrock model or inference profile ID"},
		{"a bad model", "dev", map[string]string{"llmProvider": "anthropic", "llmModel": "a b"}, Settings{}, "is not a model ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromContext(tt.env, context(tt.ctx))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Provider != tt.want.Provider || got.Model != tt.want.Model || !slices.Equal(got.Bedrock, tt.want.Bedrock) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseBedrock(t *testing.T) {
	tests := []struct {
		input string
		want  Bedrock
		err   bool
	}{
		{"anthropic.claude-haiku-4-5-20251001-v1:0", Bedrock{ID: "anthropic.claude-haiku-4-5-20251001-v1:0", Model: "anthropic.claude-haiku-4-5-20251001-v1:0"}, false},
		{"amazon.nova-pro-v1:0", Bedrock{ID: "amazon.nova-pro-v1:0", Model: "amazon.nova-pro-v1:0"}, false},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", Bedrock{ID: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", Geo: "us", Model: "anthropic.claude-sonnet-4-5-20250929-v1:0"}, false},
		{"eu.amazon.nova-pro-v1:0", Bedrock{ID: "eu.amazon.nova-pro-v1:0", Geo: "eu", Model: "amazon.nova-pro-v1:0"}, false},
		{"us-gov.anthropic.claude-3-haiku-20240307-v1:0", Bedrock{ID: "us-gov.anthropic.claude-3-haiku-20240307-v1:0", Geo: "us-gov", Model: "anthropic.claude-3-haiku-20240307-v1:0"}, false},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", Bedrock{ID: "global.anthropic.claude-sonnet-4-5-20250929-v1:0", Geo: "global", Model: "anthropic.claude-sonnet-4-5-20250929-v1:0"}, false},
		{"arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc123", Bedrock{ARN: "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc123"}, false},
		{"arn:aws:s3:::bucket", Bedrock{}, true},
		{"us.claude", Bedrock{}, true},
		{"claude-sonnet-4.5", Bedrock{}, true}, // the agent's short name, not Bedrock's ID
		{"*", Bedrock{}, true},
		{"anthropic.*", Bedrock{}, true},
		{"", Bedrock{}, true},
	}
	for _, tt := range tests {
		got, err := ParseBedrock(tt.input)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseBedrock(%q) = %+v, %v; want %+v, error %v", tt.input, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParseBedrock: an accepted entry never carries a wildcard, a profile
// always names its model, and only IDs of the known geographies are profiles.
func FuzzParseBedrock(f *testing.F) {
	for _, s := range []string{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0", "arn:aws:bedrock:us-east-1:1:inference-profile/x", "global.a.b", "eu..x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBedrock(s)
		if err != nil {
			return
		}
		if strings.Contains(s, "*") || strings.ContainsAny(s, " ,\n") {
			t.Fatalf("accepted %q", s)
		}
		if b.Profile() && (b.Model == "" || !strings.HasSuffix(s, "."+b.Model) || !slices.Contains(geographies, b.Geo)) {
			t.Fatalf("profile %q read as %+v", s, b)
		}
		if b.ARN == "" && b.Model == "" {
			t.Fatalf("%q read as %+v", s, b)
		}
	})
}

func TestSecretNames(t *testing.T) {
	if got := SecretName("prod", "anthropic"); got != "ra-prod-model-anthropic" {
		t.Errorf("SecretName = %s", got)
	}
	if got := SecretVariable("gemini"); got != "RA_MODEL_SECRET_GEMINI" {
		t.Errorf("SecretVariable = %s", got)
	}
}
