module github.com/remote-agents/remote-agents/infra

go 1.26.0

require (
	github.com/aws/aws-cdk-go/awscdk/v2 v2.276.0
	github.com/aws/constructs-go/constructs/v10 v10.8.1
	github.com/aws/jsii-runtime-go v1.142.0
	github.com/remote-agents/remote-agents v0.0.0
)

replace github.com/remote-agents/remote-agents => ../
