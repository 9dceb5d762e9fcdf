package stack

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// Throttle is the API stage's default route throttling: API Gateway answers
// 429 beyond it, before any function runs.
type Throttle struct {
	// Rate is the steady-state limit, in requests per second.
	Rate float64
	// Burst is how many requests may arrive at once above the rate.
	Burst int
}

// DefaultThrottle is the API's throttling without context: far below the
// account's (10,000 requests per second), above what a few hundred sandboxes'
// heartbeats, events and tool calls and their apps' calls make.
var DefaultThrottle = Throttle{Rate: 100, Burst: 200}

// Context keys of the throttling.
const (
	ThrottleRateKey  = "apiThrottleRate"
	ThrottleBurstKey = "apiThrottleBurst"
)

// ThrottleFromContext reads the throttling from the CDK context
// (apiThrottleRate, apiThrottleBurst; a string from -c or a number from
// cdk.json); a key not set takes DefaultThrottle's value.
func ThrottleFromContext(get func(key string) any) (Throttle, error) {
	t := DefaultThrottle
	number := func(key string) (float64, bool, error) {
		switch v := get(key).(type) {
		case nil:
			return 0, false, nil
		case float64:
			return v, true, nil
		case string:
			if strings.TrimSpace(v) == "" {
				return 0, false, nil
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, false, fmt.Errorf("context %s: %q is not a number", key, v)
			}
			return f, true, nil
		default:
			return 0, false, fmt.Errorf("context %s: %v is not a number", key, v)
		}
	}
	rate, ok, err := number(ThrottleRateKey)
	if err != nil {
		return Throttle{}, err
	}
	if ok {
		if !(rate > 0) || math.IsInf(rate, 0) {
			return Throttle{}, fmt.Errorf("context %s: %v, want a positive number of requests per second", ThrottleRateKey, rate)
		}
		t.Rate = rate
	}
	burst, ok, err := number(ThrottleBurstKey)
	if err != nil {
		return Throttle{}, err
	}
	if ok {
		if burst < 1 || burst != math.Trunc(burst) || burst > math.MaxInt32 {
			return Throttle{}, fmt.Errorf("context %s: %v, want a positive whole number of requests", ThrottleBurstKey, burst)
		}
		t.Burst = int(burst)
	}
	return t, nil
}

// AccessLogFields are the API's access log entries, one JSON object per
// request, by field: who called (source IP, user agent), which route, the
// answer and its timing, and the request ids that find the function's own log
// lines. Nothing a caller sends as a credential: no header (Authorization,
// X-Session-Token), no query string (the embed URL carries ?token=), no path
// (the route key names the route without the caller's ids), no body.
var AccessLogFields = map[string]string{
	"requestId":            "$context.requestId",
	"ip":                   "$context.identity.sourceIp",
	"userAgent":            "$context.identity.userAgent",
	"requestTime":          "$context.requestTime",
	"httpMethod":           "$context.httpMethod",
	"routeKey":             "$context.routeKey",
	"protocol":             "$context.protocol",
	"status":               "$context.status",
	"responseLength":       "$context.responseLength",
	"latency":              "$context.responseLatency",
	"integrationLatency":   "$context.integrationLatency",
	"integrationStatus":    "$context.integrationStatus",
	"integrationRequestId": "$context.integration.requestId",
	"integrationError":     "$context.integrationErrorMessage",
	"error":                "$context.error.message",
}

// stage gives the API's default stage an access log (JSON, AccessLogFields,
// in a log group with the stack's retention) and its default route throttling.
// Every value is a JSON string, so that an empty one ("-") keeps the line valid.
func (s *Stack) stage(p Props, removal awscdk.RemovalPolicy) {
	throttle := p.Throttle
	if throttle.Rate == 0 {
		throttle.Rate = DefaultThrottle.Rate
	}
	if throttle.Burst == 0 {
		throttle.Burst = DefaultThrottle.Burst
	}
	if throttle.Rate < 0 || throttle.Burst < 0 {
		panic(fmt.Sprintf("negative API throttling %+v", throttle))
	}
	logs := awslogs.NewLogGroup(s.Stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/ra/" + p.Env + "/api-access"),
		Retention:     retention(p.Env),
		RemovalPolicy: removal,
	})
	format, err := json.Marshal(AccessLogFields) // keys sorted: the same template every synth
	if err != nil {
		panic(err)
	}
	stage := s.API.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: logs.LogGroupArn(),
		Format:         jsii.String(string(format)),
	})
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit:  jsii.Number(throttle.Rate),
		ThrottlingBurstLimit: jsii.Number(float64(throttle.Burst)),
	})
}
