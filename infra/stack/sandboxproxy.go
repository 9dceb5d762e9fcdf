package stack

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecr"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Ports of the sandbox proxy service: where it serves sandboxes
// (config.DefaultSandboxProxyAddr) and where it answers its load
// balancer's health checks (config.DefaultSandboxProxyHealthAddr), and the
// balancer's listener.
const (
	SandboxProxyPort         = 8080
	SandboxProxyHealthPort   = 8081
	SandboxProxyListenerPort = 80
)

// SandboxProxyContainer names the sandbox proxy's container.
const SandboxProxyContainer = "proxy"

// E2BFunction is the sandbox API's function, which mints the envd access
// tokens the sandbox proxy checks.
const E2BFunction = "e2b"

// sandboxProxy adds the sandbox proxy (services/sandboxproxy): the way in
// to every sandbox's envd from the internet, which API Gateway and Lambda
// cannot be (they hold no long stream and reach no task). A Fargate
// service of ours, in the platform services' cluster (the egress proxy's:
// not the sandboxes', whose tasks the launchers may stop), behind an
// internet-facing Application Load Balancer; it dials each sandbox's task
// at its private address, which the sandboxes' security groups let it
// reach on envd's port alone. And the secret envd access tokens are
// derived from, read by the sandbox API's function (which mints them) and
// the proxy (which checks them). The output SandboxProxyUrl is the proxy's
// URL, the SDKs' E2B_SANDBOX_URL.
//
// HTTP only: the stack has no domain nor certificate of its own (as the
// distribution uses CloudFront's), and the balancer's DNS name has no
// certificate; an operator with a domain adds an HTTPS listener with its
// ACM certificate (and a wildcard record for <port>-<id>.<domain>, then
// RA_E2B_DOMAIN on the e2b function).
func (s *Stack) sandboxProxy(p Props, removal awscdk.RemovalPolicy, sb sandboxes, fenced egress) {
	st := s.Stack
	vpc := sb.vpc

	balancerGroup := awsec2.NewSecurityGroup(st, jsii.String("SandboxProxyBalancerGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("The sandbox proxy load balancer: HTTP from anywhere in, the proxy out"),
		AllowAllOutbound: jsii.Bool(false),
	})
	proxyGroup := awsec2.NewSecurityGroup(st, jsii.String("SandboxProxyGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("The sandbox proxy: its load balancer in; the envd of sandboxes and the AWS APIs out"),
		AllowAllOutbound: jsii.Bool(false),
	})
	balancerGroup.AddIngressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(SandboxProxyListenerPort)),
		jsii.String("E2B SDKs and browsers, from anywhere: the proxy checks the token of every request"), nil)
	for _, port := range []float64{SandboxProxyPort, SandboxProxyHealthPort} {
		balancerGroup.AddEgressRule(proxyGroup, awsec2.Port_Tcp(jsii.Number(port)), jsii.String("the sandbox proxy tasks"), nil)
		proxyGroup.AddIngressRule(balancerGroup, awsec2.Port_Tcp(jsii.Number(port)), jsii.String("the load balancer"), nil)
	}
	// Sandboxes, on envd's port only: a preview of another port of a
	// sandbox goes through envd (a CONNECT to the sandbox's loopback,
	// package sandboxproxy), so no other port of a sandbox is open to
	// anything. (The open sandboxes' group still describes itself as
	// taking no inbound traffic: a group's description changes only with
	// the group, replaced under the running tasks.)
	envd := awsec2.Port_Tcp(jsii.Number(sandboxwire.EnvdPort))
	for _, group := range []awsec2.SecurityGroup{sb.group, fenced.isolated} {
		group.AddIngressRule(proxyGroup, envd, jsii.String("the sandbox proxy, to envd"), nil)
		proxyGroup.AddEgressRule(group, envd, jsii.String("the envd of sandboxes"), nil)
	}
	// DynamoDB and Secrets Manager at their public endpoints (the VPC has no
	// NAT: the tasks have public addresses), its image and logs through the
	// VPC's endpoints.
	proxyGroup.AddEgressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(443)), jsii.String("the AWS APIs: DynamoDB, Secrets Manager, ECR, CloudWatch Logs"), nil)
	fenced.endpoints.AddIngressRule(proxyGroup, awsec2.Port_Tcp(jsii.Number(443)), jsii.String("the sandbox proxy starts: image, layers, logs"), nil)

	secret := awssecretsmanager.NewSecret(st, jsii.String("E2BTokenSecret"), &awssecretsmanager.SecretProps{
		SecretName: jsii.String("ra/" + p.Env + "/e2b-token"),
		Description: jsii.String("Remote Agents (" + p.Env + "): what the sandbox API and the sandbox proxy derive sandboxes' envd access tokens from. " +
			"Changing it invalidates every token the SDKs hold."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			ExcludePunctuation: jsii.Bool(true), PasswordLength: jsii.Number(64),
		},
		RemovalPolicy: removal,
	})
	if fn, ok := s.Functions[E2BFunction]; ok {
		fn.AddEnvironment(jsii.String("RA_E2B_TOKEN_SECRET"), secret.SecretArn(), nil)
		secret.GrantRead(fn, nil)
	}

	role := awsiam.NewRole(st, jsii.String("SandboxProxyTaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("The sandbox proxy: sessions and the addresses of their tasks, read; the envd token secret"),
	})
	secret.GrantRead(role, nil)
	s.grantSandboxProxy(role)
	task := awsecs.NewFargateTaskDefinition(st, jsii.String("SandboxProxyTask"), &awsecs.FargateTaskDefinitionProps{
		Family:         jsii.String("ra-" + p.Env + "-sandbox-proxy"),
		Cpu:            jsii.Number(512),
		MemoryLimitMiB: jsii.Number(1024),
		TaskRole:       role,
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	repo := awsecr.NewRepository(st, jsii.String("SandboxProxyRepository"), &awsecr.RepositoryProps{
		RepositoryName:     jsii.String("ra-" + p.Env + "-sandbox-proxy"),
		ImageScanOnPush:    jsii.Bool(true),
		RemovalPolicy:      removal,
		EmptyOnDelete:      jsii.Bool(!Prod(p.Env)),
		ImageTagMutability: awsecr.TagMutability_MUTABLE,
	})
	var image awsecs.ContainerImage = awsecs.ContainerImage_FromEcrRepository(repo, jsii.String("latest"))
	if p.BuildSandboxImage {
		image = awsecs.ContainerImage_FromAsset(jsii.String(p.RepoDir), &awsecs.AssetImageProps{File: jsii.String("services/sandboxproxy/Dockerfile")})
	}
	env := s.environment(p)
	env["RA_E2B_TOKEN_SECRET"] = secret.SecretArn()
	env["RA_SANDBOX_PROXY_ADDR"] = jsii.String(":" + strconv.Itoa(SandboxProxyPort))
	env["RA_SANDBOX_PROXY_HEALTH_ADDR"] = jsii.String(":" + strconv.Itoa(SandboxProxyHealthPort))
	task.AddContainer(jsii.String(SandboxProxyContainer), &awsecs.ContainerDefinitionOptions{
		ContainerName: jsii.String(SandboxProxyContainer),
		Image:         image,
		Essential:     jsii.Bool(true),
		Environment:   &env,
		PortMappings: &[]*awsecs.PortMapping{
			{ContainerPort: jsii.Number(SandboxProxyPort)}, {ContainerPort: jsii.Number(SandboxProxyHealthPort)},
		},
		Logging: awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{
			StreamPrefix: jsii.String("sandbox-proxy"),
			LogGroup: awslogs.NewLogGroup(st, jsii.String("SandboxProxyLogs"), &awslogs.LogGroupProps{
				LogGroupName:  jsii.String("/ra/" + p.Env + "/sandbox-proxy"),
				Retention:     retention(p.Env),
				RemovalPolicy: removal,
			}),
		}),
	})
	service := awsecs.NewFargateService(st, jsii.String("SandboxProxy"), &awsecs.FargateServiceProps{
		ServiceName:    jsii.String("ra-" + p.Env + "-sandbox-proxy"),
		Cluster:        fenced.cluster,
		TaskDefinition: task,
		DesiredCount:   jsii.Number(2),
		AssignPublicIp: jsii.Bool(true), // AWS's APIs: the VPC has no NAT
		SecurityGroups: &[]awsec2.ISecurityGroup{proxyGroup},
		VpcSubnets:     &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		CircuitBreaker: &awsecs.DeploymentCircuitBreaker{Rollback: jsii.Bool(true)},
		// A deployment starts the new tasks before it stops the old.
		MinHealthyPercent: jsii.Number(100),
	})
	alb := awselasticloadbalancingv2.NewApplicationLoadBalancer(st, jsii.String("SandboxProxyBalancer"), &awselasticloadbalancingv2.ApplicationLoadBalancerProps{
		LoadBalancerName: jsii.String("ra-" + p.Env + "-sandbox-proxy"),
		Vpc:              vpc,
		InternetFacing:   jsii.Bool(true),
		SecurityGroup:    balancerGroup,
		VpcSubnets:       &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		// envd's streams (a command's output, a watch) may be silent long.
		IdleTimeout:             awscdk.Duration_Seconds(jsii.Number(config.SandboxProxyIdleTimeout.Seconds())),
		DropInvalidHeaderFields: jsii.Bool(true),
	})
	alb.AddListener(jsii.String("Http"), &awselasticloadbalancingv2.BaseApplicationListenerProps{
		Port:     jsii.Number(SandboxProxyListenerPort),
		Protocol: awselasticloadbalancingv2.ApplicationProtocol_HTTP,
		Open:     jsii.Bool(false), // the balancer's group says who: anyone
	}).AddTargets(jsii.String("Proxy"), &awselasticloadbalancingv2.AddApplicationTargetsProps{
		Port:     jsii.Number(SandboxProxyPort),
		Protocol: awselasticloadbalancingv2.ApplicationProtocol_HTTP,
		Targets: &[]awselasticloadbalancingv2.IApplicationLoadBalancerTarget{service.LoadBalancerTarget(&awsecs.LoadBalancerTargetOptions{
			ContainerName: jsii.String(SandboxProxyContainer), ContainerPort: jsii.Number(SandboxProxyPort),
		})},
		// The service's own health listener: every path of the proxy's
		// port is a sandbox's (envd answers GET /health itself).
		HealthCheck: &awselasticloadbalancingv2.HealthCheck{
			Port:             jsii.String(strconv.Itoa(SandboxProxyHealthPort)),
			Path:             jsii.String("/"),
			HealthyHttpCodes: jsii.String("200"),
		},
		// What a task that stops (a deployment, a scale-in) still streams
		// gets a minute to end.
		DeregistrationDelay: awscdk.Duration_Seconds(jsii.Number(60)),
	})
	url := awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("http://"), alb.LoadBalancerDnsName()})
	awscdk.NewCfnOutput(st, jsii.String("SandboxProxyUrl"), &awscdk.CfnOutputProps{
		Value:       url,
		Description: jsii.String("The sandbox proxy, every sandbox's envd behind it: the E2B SDKs' E2B_SANDBOX_URL"),
	})
	awscdk.NewCfnOutput(st, jsii.String("SandboxProxyRepositoryUri"), &awscdk.CfnOutputProps{Value: repo.RepositoryUri()})
}

// grantSandboxProxy lets the proxy read sessions (their tokens, state and
// task) and, of the idempotency table, only where each sandbox's task runs
// (access.AddressOfItems).
func (s *Stack) grantSandboxProxy(role awsiam.Role) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(access.GetItem),
		Resources: &[]*string{s.Tables[s.name(access.Sessions)].TableArn()},
	}))
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings(access.GetItem),
		Resources:  &[]*string{s.Tables[s.name(access.Idempotency)].TableArn()},
		Conditions: leadingKeys([]string{access.AddressOfItems}, nil),
	}))
}

// suppressSandboxProxyFindings records the findings of the sandbox proxy's
// resources that the stack accepts, and why.
func (s *Stack) suppressSandboxProxyFindings(suppress func(constructs.IConstruct, bool, ...*cdknag.NagPackSuppression), child func(string) constructs.IConstruct) {
	suppress(child("E2BTokenSecret"), false, finding("AwsSolutions-SMG4",
		"The E2B SDKs hold the envd access tokens derived from it for as long as their sandboxes live: rotating it would lock them out "+
			"of their sandboxes. An operator rotates it (put-secret-value) between deployments, when no sandbox's token is to be kept."))
	suppress(child("SandboxProxyTask"), true,
		finding("AwsSolutions-ECS2", "The proxy's environment is where the platform's resources are (RA_ENV, queues, the secret's ARN): nothing secret."),
		finding("AwsSolutions-IAM5", "The execution role's ecr:GetAuthorizationToken, which takes no resource ARN (the image pull itself is on the "+
			"repository's ARN).", "Resource::*"))
	suppress(child("SandboxProxyBalancerGroup"), false, finding("AwsSolutions-EC23",
		"The E2B SDKs and browsers (preview URLs) reach sandboxes from anywhere, as E2B's own endpoint is reached: the proxy checks "+
			"every request's token (an envd access token, a traffic token, a session token) before anything reaches a sandbox."))
	suppress(child("SandboxProxyBalancer"), false, finding("AwsSolutions-ELB2",
		"Access logs would need a log bucket of their own, with its own findings; the VPC's flow log records every connection, and an "+
			"operator may turn the logs on (access_logs.s3.enabled)."))
}
