package stack

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/infra/models"
)

// secrets adds one secret per key provider, created empty: the operator puts
// the key in (aws secretsmanager put-secret-value), and no key is ever in the
// template. The L2 Secret would generate a value; the L1 resource without
// SecretString or GenerateSecretString is a secret with no value.
func (s *Stack) secrets(removal awscdk.RemovalPolicy) {
	s.Secrets = map[string]awssecretsmanager.CfnSecret{}
	for _, provider := range models.KeyProviders {
		name := models.SecretName(s.Set.Env, provider)
		secret := awssecretsmanager.NewCfnSecret(s.Stack, jsii.String(s.id(name, "Secret")), &awssecretsmanager.CfnSecretProps{
			Name: jsii.String(name),
			Description: jsii.String("Remote Agents (" + s.Set.Env + "): the " + provider + " API key, read by the model function only. " +
				"Created empty: aws secretsmanager put-secret-value --secret-id " + name + " --secret-string <key>"),
		})
		secret.ApplyRemovalPolicy(removal, nil)
		s.Secrets[provider] = secret
	}
}

// Bedrock's model invocation actions: Converse and ConverseStream are
// authorised by them too.
var bedrockActions = []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}

// grantModels lets the model function, and it alone, read the providers'
// secrets and invoke the chosen Bedrock models.
func (s *Stack) grantModels() {
	fn := s.Functions[s.Model]
	var secrets []*string
	for _, provider := range models.KeyProviders {
		secrets = append(secrets, s.Secrets[provider].Ref())
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &secrets,
	}))
	for _, st := range s.bedrockStatements() {
		fn.AddToRolePolicy(st)
	}
}

// bedrockStatements allow invoking the chosen models, each by its ARN: a
// foundation model in the stack's Region; a cross-Region inference profile in
// the stack's Region and account, with its model in any Region it routes to,
// only through that profile (and, for a global profile, the model's
// Region-less ARN); an ARN as it is.
func (s *Stack) bedrockStatements() []awsiam.PolicyStatement {
	partition, region, account := *awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *awscdk.Aws_ACCOUNT_ID()
	arn := func(region, account, resource string) *string {
		return jsii.String(strings.Join([]string{"arn", partition, "bedrock", region, account, resource}, ":"))
	}
	var direct []*string
	var out []awsiam.PolicyStatement
	for _, id := range s.models.Bedrock {
		b, err := models.ParseBedrock(id)
		if err != nil {
			panic(err) // Props.Models was validated
		}
		switch {
		case b.ARN != "":
			direct = append(direct, jsii.String(b.ARN))
		case !b.Profile():
			direct = append(direct, arn(region, "", "foundation-model/"+b.Model))
		default:
			profile := arn(region, account, "inference-profile/"+b.ID)
			direct = append(direct, profile)
			routed := []*string{arn("*", "", "foundation-model/"+b.Model)}
			if b.Global() {
				routed = append(routed, arn("", "", "foundation-model/"+b.Model))
			}
			out = append(out, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings(bedrockActions...),
				Resources:  &routed,
				Conditions: &map[string]any{"StringLike": map[string]any{"bedrock:InferenceProfileArn": profile}},
			}))
		}
	}
	if len(direct) > 0 {
		out = append([]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(bedrockActions...),
			Resources: &direct,
		})}, out...)
	}
	return out
}

// modelOutputs are the sandboxes' default model and the Bedrock models, for
// `make providers` to report next to the secrets.
func (s *Stack) modelOutputs() {
	out := func(id, value string) {
		if value != "" {
			awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: jsii.String(value)})
		}
	}
	out(models.OutputProvider, s.models.Provider)
	out(models.OutputModel, s.models.Model)
	out(models.OutputBedrock, strings.Join(s.models.Bedrock, ","))
}
