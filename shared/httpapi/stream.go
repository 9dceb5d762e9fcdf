package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// FunctionURLStream adapts a streaming route to a Lambda function URL with
// response streaming (invoke mode RESPONSE_STREAM): the request becomes the HTTP
// API event the handler knows, with the path parameters of pattern, and the body
// streams through a pipe as the handler writes it.
func FunctionURLStream(method, pattern string, h StreamHandler) func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return func(ctx context.Context, in events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		params, ok := MatchPath(pattern, in.RawPath)
		if !ok {
			return streamed(Error(ctx, nil, notFound())), nil
		}
		req := Request{
			Version:               "2.0",
			RouteKey:              method + " " + pattern,
			RawPath:               in.RawPath,
			RawQueryString:        in.RawQueryString,
			Cookies:               in.Cookies,
			Headers:               lowerKeys(in.Headers),
			QueryStringParameters: in.QueryStringParameters,
			PathParameters:        params,
			Body:                  in.Body,
			IsBase64Encoded:       in.IsBase64Encoded,
		}
		req.RequestContext.RouteKey = req.RouteKey
		req.RequestContext.RequestID = in.RequestContext.RequestID
		req.RequestContext.HTTP.Method = in.RequestContext.HTTP.Method
		req.RequestContext.HTTP.Path = in.RequestContext.HTTP.Path
		req.RequestContext.HTTP.SourceIP = in.RequestContext.HTTP.SourceIP
		req.RequestContext.HTTP.UserAgent = in.RequestContext.HTTP.UserAgent
		// A URL of auth type AWS_IAM passes who signed, as API Gateway's IAM
		// authorizer does.
		if a := in.RequestContext.Authorizer; a != nil && a.IAM != nil {
			req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccessKey: a.IAM.AccessKey, AccountID: a.IAM.AccountID, CallerID: a.IAM.CallerID, UserARN: a.IAM.UserARN, UserID: a.IAM.UserID,
			}}
		}
		if req.RequestContext.HTTP.Method != method && req.RequestContext.HTTP.Method != http.MethodOptions {
			return streamed(Error(ctx, nil, methodNotAllowed(req.RequestContext.HTTP.Method))), nil
		}
		res, body := h(ctx, req)
		if body == nil {
			return streamed(res), nil
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(body(pw, func() {})) }()
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: status(res), Headers: res.Headers, Body: pr}, nil
	}
}

func streamed(res Response) *events.LambdaFunctionURLStreamingResponse {
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: status(res), Headers: res.Headers, Body: strings.NewReader(res.Body)}
}

func status(res Response) int {
	if res.StatusCode == 0 {
		return http.StatusOK
	}
	return res.StatusCode
}

func lowerKeys(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}
