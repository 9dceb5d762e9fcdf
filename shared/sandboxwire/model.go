package sandboxwire

import (
	"slices"
	"strings"
)

// The model route: a sandbox's model SDK clients take ModelBaseURL as their
// base URL and the sandbox token as their API key (or bearer), and the
// platform's model gateway puts the provider's real credential in, forwards
// the call and streams the answer back as the provider sent it, metering the
// tokens. No provider key is ever in a sandbox.
//
//	POST /sandbox/{sessionId}/model/{provider}/{path…}
const RouteModel = "model"

// Model providers the gateway serves, by the names of RA_LLM_PROVIDER.
const (
	ModelAnthropic = "anthropic"
	ModelOpenAI    = "openai"
	ModelGemini    = "gemini"
	ModelMistral   = "mistral"
	ModelBedrock   = "bedrock"
)

// ModelProviders lists the providers a sandbox reaches through the gateway;
// others (local model servers) it reaches itself.
var ModelProviders = []string{ModelAnthropic, ModelOpenAI, ModelGemini, ModelMistral, ModelBedrock}

// ViaGateway reports whether a sandbox calls provider through the gateway.
func ViaGateway(provider string) bool { return slices.Contains(ModelProviders, provider) }

// ModelBaseURL is the base URL of provider's SDK client in the sandbox of
// session id, the model route's root at gateway (PROLIFERATE_GATEWAY_URL, or
// EnvModelGatewayURL where the platform serves the route elsewhere).
func ModelBaseURL(gateway, sessionID, provider string) string {
	return strings.TrimRight(gateway, "/") + Prefix + sessionID + "/" + RouteModel + "/" + provider
}

// EnvModelGatewayURL is where a sandbox reaches the model route, when not at
// its gateway (EnvGatewayURL): on AWS the route streams from a function URL
// of its own.
const EnvModelGatewayURL = "RA_MODEL_GATEWAY_URL"
