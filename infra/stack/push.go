package stack

import (
	"encoding/json"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// PushStage is the push channel's WebSocket API stage.
const PushStage = "push"

// PushAccessLogFields are what the push channel's access log records of each
// connect and disconnect (no query string, no header).
var PushAccessLogFields = map[string]string{
	"requestId":         "$context.requestId",
	"requestTime":       "$context.requestTime",
	"routeKey":          "$context.routeKey",
	"eventType":         "$context.eventType",
	"connectionId":      "$context.connectionId",
	"status":            "$context.status",
	"sourceIp":          "$context.identity.sourceIp",
	"integrationStatus": "$context.integrationStatus",
	"error":             "$context.error.message",
}

// push adds the push channel: a WebSocket API whose routes (routes.Sockets,
// $connect and $disconnect) its function serves, one stage with an access
// log, its stage URL for the workers to hand sandboxes (RA_PUSH_URL), and its
// @connections endpoint (RA_PUSH_ENDPOINT) with execute-api:ManageConnections
// on it for the functions that push (access.Push), and for them alone. It
// returns the stage URL.
func (s *Stack) push(p Props, removal awscdk.RemovalPolicy) *string {
	api := awsapigatewayv2.NewWebSocketApi(s.Stack, jsii.String("PushApi"), &awsapigatewayv2.WebSocketApiProps{
		ApiName:     jsii.String("ra-" + p.Env + "-push"),
		Description: jsii.String("Remote Agents push channel to sandboxes (" + p.Env + ")"),
	})
	for _, r := range routes.Sockets() {
		api.AddRoute(jsii.String(r.Key), &awsapigatewayv2.WebSocketRouteOptions{
			Integration: awsapigatewayv2integrations.NewWebSocketLambdaIntegration(jsii.String(logicalID("push "+r.Key)), s.Functions[r.Function], nil),
		})
	}
	stage := awsapigatewayv2.NewWebSocketStage(s.Stack, jsii.String("PushApiStage"), &awsapigatewayv2.WebSocketStageProps{
		WebSocketApi: api,
		StageName:    jsii.String(PushStage),
		AutoDeploy:   jsii.Bool(true),
	})
	logs := awslogs.NewLogGroup(s.Stack, jsii.String("PushAccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/ra/" + p.Env + "/push-access"),
		Retention:     retention(p.Env),
		RemovalPolicy: removal,
	})
	format, err := json.Marshal(PushAccessLogFields)
	if err != nil {
		panic(err)
	}
	cfn := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfn.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: logs.LogGroupArn(),
		Format:         jsii.String(string(format)),
	})
	// Connects are throttled like the HTTP API's routes.
	throttle := p.Throttle
	if throttle.Rate <= 0 || throttle.Burst <= 0 {
		throttle = DefaultThrottle
	}
	cfn.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit:  jsii.Number(throttle.Rate),
		ThrottlingBurstLimit: jsii.Number(float64(throttle.Burst)),
	})
	s.PushAPI = api
	connections := s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("execute-api"),
		Resource:     api.ApiId(),
		ResourceName: jsii.String(PushStage + "/POST/@connections/*"),
	})
	for name, a := range s.Grants() {
		if !a.Push {
			continue
		}
		fn := s.Functions[name]
		fn.AddEnvironment(jsii.String("RA_PUSH_ENDPOINT"), stage.CallbackUrl(), nil)
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("execute-api:ManageConnections"),
			Resources: &[]*string{connections},
		}))
	}
	for _, name := range []string{routes.JobWorker, ToolWorker, "embed"} {
		s.Functions[name].AddEnvironment(jsii.String("RA_PUSH_URL"), stage.Url(), nil)
	}
	return stage.Url()
}
