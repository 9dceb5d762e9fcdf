package providers_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
)

func TestBedrockContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Bedrock(t), func(o providers.Options) llm.Provider {
		cfg := aws.Config{
			Region:       "us-east-1",
			Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
			BaseEndpoint: aws.String(o.BaseURL),
		}
		o.Model = "claude-sonnet-4.5"
		return providers.NewBedrock(cfg, o)
	})
}
