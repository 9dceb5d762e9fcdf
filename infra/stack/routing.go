package stack

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfrontorigins"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// functions adds the HTTP API, one function per function of the route table
// (and the workers: jobworker, the tools queue's, webhooks), and their
// routes; it returns the streaming
// routes, each served by a function URL with response streaming.
func (s *Stack) functions(p Props, removal awscdk.RemovalPolicy) []stream {
	s.API = awsapigatewayv2.NewHttpApi(s.Stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String("ra-" + p.Env + "-api"),
		Description:   jsii.String("Remote Agents (" + p.Env + ")"),
		CorsPreflight: s.cors(p.AllowedOrigins),
	})
	s.lambdas(p, removal)

	var streams []stream
	urls := map[string]stream{}
	for _, r := range s.Routes {
		fn := s.Functions[r.Function]
		if !r.Stream {
			opts := &awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(r.Path),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
				Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(logicalID(r.Key())), fn, nil),
			}
			if r.Internal {
				// The orchestrator's routes: SigV4-signed by a principal of
				// the account allowed execute-api:Invoke; the jobs function
				// takes only the orchestrator's role.
				opts.Authorizer = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
			}
			s.API.AddRoutes(opts)
			continue
		}
		if r.Internal {
			s.internalStream(p, r, fn)
			continue
		}
		st, ok := urls[r.Function]
		if !ok {
			auth := awslambda.FunctionUrlAuthType_NONE
			if signed(r) {
				auth = awslambda.FunctionUrlAuthType_AWS_IAM
			}
			st = stream{url: fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: auth, InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM}), signed: signed(r)}
			urls[r.Function] = st
		}
		if st.signed != signed(r) {
			panic("function " + r.Function + " serves streaming routes with and without a body: give them one function each")
		}
		st.pattern = PathPattern(r.Path)
		streams = append(streams, st)
	}
	return streams
}

// internalStream gives the orchestrator's streaming route r its function's
// own URL: auth type AWS_IAM, invokable by the orchestrator's role only, and
// not behind CloudFront, whose origin access control would sign in its
// stead (the function checks who signed, as on the API's IAM routes). The
// URL is an output, JobLogStreamUrl: the route's path goes after it.
func (s *Stack) internalStream(p Props, r routes.Route, fn awslambda.Function) {
	url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM, InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM})
	fn.AddPermission(jsii.String("OrchestratorInvokesUrl"), &awslambda.Permission{
		Principal:           awsiam.NewArnPrincipal(s.orchestratorRole(p)),
		Action:              jsii.String("lambda:InvokeFunctionUrl"),
		FunctionUrlAuthType: awslambda.FunctionUrlAuthType_AWS_IAM,
	})
	awscdk.NewCfnOutput(s.Stack, jsii.String(internalStreamOutput(r)), &awscdk.CfnOutputProps{
		Value:       url.Url(),
		Description: jsii.String("The orchestrator's " + r.Method + " " + r.Path + " (SigV4, service lambda): this URL without its last /, then the path"),
	})
}

// internalStreamOutput names the output of an internal streaming route's URL.
func internalStreamOutput(r routes.Route) string {
	if r.Path == routes.PathJobLogStream {
		return "JobLogStreamUrl"
	}
	return logicalID(r.Key()) + "Url"
}

// lambdas adds one function per function of the route table and of
// routes.Workers, the tools queue's worker, and the model function's
// secrets' variables; it returns
// which functions serve a streaming route.
func (s *Stack) lambdas(p Props, removal awscdk.RemovalPolicy) map[string]bool {
	env := s.environment(p)
	streaming := map[string]bool{}
	for _, r := range s.Routes {
		streaming[r.Function] = streaming[r.Function] || r.Stream
	}
	for _, name := range s.FunctionNames() {
		s.Functions[name] = s.function(name, name, p, env, streaming[name], removal)
	}
	// Long tool calls run on a second function of the worker's code, whose timeout
	// fits the tools queue's visibility timeout (the jobs queue's is shorter).
	s.Functions[ToolWorker] = s.function(ToolWorker, routes.JobWorker, p, env, false, removal)
	for provider, secret := range s.Secrets {
		s.Functions[s.Model].AddEnvironment(jsii.String(models.SecretVariable(provider)), secret.Ref(), nil)
	}
	s.declareSAM(p)
	return streaming
}

// cors is the API's CORS configuration: API Gateway answers preflights itself
// (its routes have no OPTIONS), for the allowed origins, with the handlers'
// policy (routes.CORS*) and the methods of the route table's CORS routes; nil
// (no CORS) without allowed origins. It covers every route of the API; only
// the browser routes are written for browsers, the rest (sandbox, tool
// callbacks) take tokens no browser page holds. The events route is not on the
// API: its handler answers its preflights through CloudFront.
func (s *Stack) cors(origins []string) *awsapigatewayv2.CorsPreflightOptions {
	if len(origins) == 0 {
		return nil
	}
	methods := []awsapigatewayv2.CorsHttpMethod{awsapigatewayv2.CorsHttpMethod_OPTIONS}
	for _, r := range s.Routes {
		if m := awsapigatewayv2.CorsHttpMethod(r.Method); r.CORS() && !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	return &awsapigatewayv2.CorsPreflightOptions{
		AllowOrigins:  jsii.Strings(origins...),
		AllowMethods:  &methods,
		AllowHeaders:  jsii.Strings(routes.CORSAllowHeaders()...),
		ExposeHeaders: jsii.Strings(routes.CORSExposeHeaders()...),
		MaxAge:        awscdk.Duration_Seconds(jsii.Number(routes.CORSMaxAge)),
	}
}

// stream is a streaming route: the CloudFront path pattern that reaches its
// function URL, and whether CloudFront signs its requests to it.
type stream struct {
	pattern string
	url     awslambda.FunctionUrl
	signed  bool
}

// signed reports whether CloudFront reaches r's function URL signed (origin
// access control; the URL takes only AWS_IAM): routes without a body. Lambda
// takes a signed POST or PUT only with the body's SHA-256 in
// x-amz-content-sha256, which the caller would have to send (the providers'
// SDKs do not), and signing replaces the caller's Authorization header, which
// carries its token. The URL of a route with a body takes any caller (auth
// NONE), reached through CloudFront like the API, and its handler
// authenticates every request, as every handler does.
func signed(r routes.Route) bool { return r.Method == "GET" || r.Method == "HEAD" }

// PathPattern is the CloudFront path pattern of an API Gateway route path:
// each {parameter} is a '*', and trailing ones ({provider}/{proxy+}) one '*'.
func PathPattern(path string) string {
	parts := strings.Split(path, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") {
			parts[i] = "*"
		}
	}
	for len(parts) > 2 && parts[len(parts)-1] == "*" && parts[len(parts)-2] == "*" {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, "/")
}

// FunctionNames returns every function of the route table, in its order, and
// the functions that serve no route, routes.Workers: the jobs worker and the
// webhooks function (routes.Functions of the stack's table).
func (s *Stack) FunctionNames() []string {
	var out []string
	for _, r := range s.Routes {
		if !slices.Contains(out, r.Function) {
			out = append(out, r.Function)
		}
	}
	return append(out, routes.Workers...)
}

// ModelRoutePrefix starts the path of the model route, through which
// sandboxes call their model provider.
const ModelRoutePrefix = "/sandbox/{sessionId}/model/"

// modelFunction returns the function of the model route, which must stream:
// sandboxes reach model providers only through it.
func modelFunction(rs []routes.Route) (string, error) {
	for _, r := range rs {
		if strings.HasPrefix(r.Path, ModelRoutePrefix) {
			if !r.Stream {
				return "", fmt.Errorf("the model route %s must stream (a function URL with response streaming)", r.Key())
			}
			return r.Function, nil
		}
	}
	return "", errors.New("the route table has no model route (" + ModelRoutePrefix + "{provider}/{proxy+}): deployed sandboxes would reach no model")
}

// distribution is the public entry point: CloudFront in front of the HTTP API
// and of the streaming routes' function URLs (Lambda response streaming), so
// that the embed view, its API calls and its event stream share one origin, and
// sandboxes reach their channel and their model calls at one gateway URL.
func (s *Stack) distribution(streams []stream) awscloudfront.Distribution {
	apiDomain := awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), s.API.ApiEndpoint(), nil))
	api := awscloudfrontorigins.NewHttpOrigin(apiDomain, &awscloudfrontorigins.HttpOriginProps{
		ProtocolPolicy: awscloudfront.OriginProtocolPolicy_HTTPS_ONLY,
	})
	// Nothing cached, every method, the caller's headers (Authorization among
	// them) but Host, which must be the origin's.
	opts := &awscloudfront.AddBehaviorOptions{
		ViewerProtocolPolicy: awscloudfront.ViewerProtocolPolicy_REDIRECT_TO_HTTPS,
		AllowedMethods:       awscloudfront.AllowedMethods_ALLOW_ALL(),
		CachePolicy:          awscloudfront.CachePolicy_CACHING_DISABLED(),
		OriginRequestPolicy:  awscloudfront.OriginRequestPolicy_ALL_VIEWER_EXCEPT_HOST_HEADER(),
	}
	dist := awscloudfront.NewDistribution(s.Stack, jsii.String("Public"), &awscloudfront.DistributionProps{
		Comment: jsii.String("Remote Agents (" + s.Set.Env + ")"),
		DefaultBehavior: &awscloudfront.BehaviorOptions{
			Origin:               api,
			ViewerProtocolPolicy: opts.ViewerProtocolPolicy,
			AllowedMethods:       opts.AllowedMethods,
			CachePolicy:          opts.CachePolicy,
			OriginRequestPolicy:  opts.OriginRequestPolicy,
		},
		HttpVersion: awscloudfront.HttpVersion_HTTP2_AND_3,
	})
	// In a fixed order, so that the template does not change between synths.
	slices.SortFunc(streams, func(a, b stream) int { return strings.Compare(a.pattern, b.pattern) })
	for _, st := range streams {
		// The read timeout bounds the wait for each chunk, not the stream.
		timeout := awscdk.Duration_Seconds(jsii.Number(60))
		var origin awscloudfront.IOrigin
		if st.signed {
			origin = awscloudfrontorigins.FunctionUrlOrigin_WithOriginAccessControl(st.url, &awscloudfrontorigins.FunctionUrlOriginWithOACProps{ReadTimeout: timeout})
		} else {
			origin = awscloudfrontorigins.NewFunctionUrlOrigin(st.url, &awscloudfrontorigins.FunctionUrlOriginProps{ReadTimeout: timeout})
		}
		dist.AddBehavior(jsii.String(st.pattern), origin, opts)
	}
	return dist
}
