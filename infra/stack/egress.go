package stack

import (
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
)

// EgressProxyPort is where the egress proxy listens, and its load
// balancer.
const EgressProxyPort = 3128

// AppSecretsFunction is the function of the secrets routes, which keeps
// the apps' secrets in Secrets Manager.
const AppSecretsFunction = "agenttypes"

// EgressProxyContainer names the proxy's container.
const EgressProxyContainer = "proxy"

// egress is what holds sandboxes cut off from the network to their egress
// policies: the isolated sandboxes' security group, whose only ways out are
// the egress proxy's load balancer and the VPC's endpoints of the AWS
// services a task needs to start (ECR, S3 for its image's layers,
// CloudWatch Logs); the proxy, a Fargate service of ours behind an internal
// Network Load Balancer that keeps the client's address (the proxy knows a
// sandbox by it); and the secret its replicas derive sandboxes' certificate
// authorities from.
type egress struct {
	isolated awsec2.SecurityGroup
	proxyURL *string
	// cluster is the platform services' cluster (the egress proxy's, the
	// sandbox proxy's), and endpoints the VPC endpoints' security group.
	cluster   awsecs.Cluster
	endpoints awsec2.SecurityGroup
}

func (s *Stack) egress(p Props, removal awscdk.RemovalPolicy, sb sandboxes, gateway, push *string) egress {
	st := s.Stack
	vpc := sb.vpc
	isolated := awsec2.NewSecurityGroup(st, jsii.String("IsolatedSandboxGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Sandboxes cut off from the network: the egress proxy and the VPC endpoints only"),
		AllowAllOutbound: jsii.Bool(false),
	})
	endpoints := awsec2.NewSecurityGroup(st, jsii.String("EndpointGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("The VPC interface endpoints (ECR, S3, CloudWatch Logs): HTTPS from sandboxes"),
		AllowAllOutbound: jsii.Bool(false),
	})
	endpoints.AddIngressRule(isolated, awsec2.Port_Tcp(jsii.Number(443)), jsii.String("isolated sandboxes start: image, layers, logs"), nil)
	endpoints.AddIngressRule(sb.group, awsec2.Port_Tcp(jsii.Number(443)), jsii.String("sandboxes start: image, layers, logs"), nil)
	isolated.AddEgressRule(endpoints, awsec2.Port_Tcp(jsii.Number(443)), jsii.String("the VPC endpoints a task starts with"), nil)
	// A task's image, its layers (S3, resolved to the interface endpoint by
	// every resolver of the VPC, the gateway endpoint beside it) and its
	// logs go through the VPC's endpoints, never the internet.
	vpc.AddGatewayEndpoint(jsii.String("S3Gateway"), &awsec2.GatewayVpcEndpointOptions{Service: awsec2.GatewayVpcEndpointAwsService_S3()})
	for id, svc := range map[string]awsec2.InterfaceVpcEndpointAwsService{
		"EcrApi": awsec2.InterfaceVpcEndpointAwsService_ECR(), "EcrDocker": awsec2.InterfaceVpcEndpointAwsService_ECR_DOCKER(),
		"Logs": awsec2.InterfaceVpcEndpointAwsService_CLOUDWATCH_LOGS(),
	} {
		vpc.AddInterfaceEndpoint(jsii.String(id), &awsec2.InterfaceVpcEndpointOptions{
			Service: svc, PrivateDnsEnabled: jsii.Bool(true), SecurityGroups: &[]awsec2.ISecurityGroup{endpoints}, Open: jsii.Bool(false),
		})
	}
	vpc.AddInterfaceEndpoint(jsii.String("S3"), &awsec2.InterfaceVpcEndpointOptions{
		Service: awsec2.InterfaceVpcEndpointAwsService_S3(), PrivateDnsEnabled: jsii.Bool(true),
		PrivateDnsOnlyForInboundResolverEndpoint: awsec2.VpcEndpointPrivateDnsOnlyForInboundResolverEndpoint_ALL_RESOLVERS,
		SecurityGroups:                           &[]awsec2.ISecurityGroup{endpoints}, Open: jsii.Bool(false),
	})

	balancer := awsec2.NewSecurityGroup(st, jsii.String("EgressBalancerGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("The egress proxy load balancer: isolated sandboxes in, the proxy out"),
		AllowAllOutbound: jsii.Bool(false),
	})
	proxyGroup := awsec2.NewSecurityGroup(st, jsii.String("EgressProxyGroup"), &awsec2.SecurityGroupProps{
		Vpc:         vpc,
		Description: jsii.String("The egress proxy: sandbox connections in (through its load balancer), the destinations their policies allow out"),
		// Out: whatever a sandbox's policy allows, which the proxy decides.
		AllowAllOutbound: jsii.Bool(true),
	})
	// Its image and logs, too, go through the VPC's endpoints (their
	// private DNS names resolve to them for every task of the VPC).
	endpoints.AddIngressRule(proxyGroup, awsec2.Port_Tcp(jsii.Number(443)), jsii.String("the egress proxy starts: image, layers, logs"), nil)
	port := awsec2.Port_Tcp(jsii.Number(EgressProxyPort))
	isolated.AddEgressRule(balancer, port, jsii.String("the egress proxy"), nil)
	balancer.AddIngressRule(isolated, port, jsii.String("isolated sandboxes"), nil)
	balancer.AddEgressRule(proxyGroup, port, jsii.String("the egress proxy tasks"), nil)
	// The load balancer keeps the sandbox's address: the proxy's tasks see
	// it as the source, and its health checks come from the balancer.
	proxyGroup.AddIngressRule(balancer, port, jsii.String("the load balancer"), nil)
	proxyGroup.AddIngressRule(isolated, port, jsii.String("isolated sandboxes, their address kept by the load balancer"), nil)

	master := awssecretsmanager.NewSecret(st, jsii.String("EgressCASecret"), &awssecretsmanager.SecretProps{
		SecretName:  jsii.String("ra/" + p.Env + "/egress-ca"),
		Description: jsii.String("Remote Agents (" + p.Env + "): what the egress proxy's replicas derive each sandbox's certificate authority from. Changing it changes every running sandbox's authority."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			ExcludePunctuation: jsii.Bool(true), PasswordLength: jsii.Number(64),
		},
		RemovalPolicy: removal,
	})
	role := awsiam.NewRole(st, jsii.String("EgressProxyTaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("The egress proxy: sessions' policies, sandboxes' addresses, apps' secrets; denials as events"),
	})
	master.GrantRead(role, nil)
	s.grantEgressProxy(role)
	task := awsecs.NewFargateTaskDefinition(st, jsii.String("EgressProxyTask"), &awsecs.FargateTaskDefinitionProps{
		Family:         jsii.String("ra-" + p.Env + "-egress-proxy"),
		Cpu:            jsii.Number(512),
		MemoryLimitMiB: jsii.Number(1024),
		TaskRole:       role,
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	repo := awsecr.NewRepository(st, jsii.String("EgressProxyRepository"), &awsecr.RepositoryProps{
		RepositoryName:     jsii.String("ra-" + p.Env + "-egress-proxy"),
		ImageScanOnPush:    jsii.Bool(true),
		RemovalPolicy:      removal,
		EmptyOnDelete:      jsii.Bool(!Prod(p.Env)),
		ImageTagMutability: awsecr.TagMutability_MUTABLE,
	})
	var image awsecs.ContainerImage = awsecs.ContainerImage_FromEcrRepository(repo, jsii.String("latest"))
	if p.BuildSandboxImage {
		image = awsecs.ContainerImage_FromAsset(jsii.String(p.RepoDir), &awsecs.AssetImageProps{File: jsii.String("services/egressproxy/Dockerfile")})
	}
	env := s.environment(p)
	env["RA_GATEWAY_URL"] = gateway
	env["RA_PUSH_URL"] = push
	env["RA_EGRESS_CA_SECRET"] = master.SecretArn()
	env["RA_EGRESS_PROXY_ADDR"] = jsii.String(":3128")
	task.AddContainer(jsii.String(EgressProxyContainer), &awsecs.ContainerDefinitionOptions{
		ContainerName: jsii.String(EgressProxyContainer),
		Image:         image,
		Essential:     jsii.Bool(true),
		Environment:   &env,
		PortMappings:  &[]*awsecs.PortMapping{{ContainerPort: jsii.Number(EgressProxyPort)}},
		Logging: awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{
			StreamPrefix: jsii.String("egress"),
			LogGroup: awslogs.NewLogGroup(st, jsii.String("EgressProxyLogs"), &awslogs.LogGroupProps{
				LogGroupName:  jsii.String("/ra/" + p.Env + "/egress-proxy"),
				Retention:     retention(p.Env),
				RemovalPolicy: removal,
			}),
		}),
	})
	// A cluster of its own: the launchers, which may stop any task of the
	// sandboxes' cluster, have nothing to do with the proxy's.
	cluster := awsecs.NewCluster(st, jsii.String("EgressCluster"), &awsecs.ClusterProps{
		ClusterName:         jsii.String("ra-" + p.Env + "-egress"),
		Vpc:                 vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
	})
	service := awsecs.NewFargateService(st, jsii.String("EgressProxy"), &awsecs.FargateServiceProps{
		ServiceName:    jsii.String("ra-" + p.Env + "-egress-proxy"),
		Cluster:        cluster,
		TaskDefinition: task,
		DesiredCount:   jsii.Number(2),
		AssignPublicIp: jsii.Bool(true), // out to the destinations the policies allow
		SecurityGroups: &[]awsec2.ISecurityGroup{proxyGroup},
		VpcSubnets:     &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
		CircuitBreaker: &awsecs.DeploymentCircuitBreaker{Rollback: jsii.Bool(true)},
		// A deployment starts the new tasks before it stops the old: the
		// sandboxes always have a way out.
		MinHealthyPercent: jsii.Number(100),
	})
	nlb := awselasticloadbalancingv2.NewNetworkLoadBalancer(st, jsii.String("EgressProxyBalancer"), &awselasticloadbalancingv2.NetworkLoadBalancerProps{
		LoadBalancerName: jsii.String("ra-" + p.Env + "-egress"),
		Vpc:              vpc,
		InternetFacing:   jsii.Bool(false),
		SecurityGroups:   &[]awsec2.ISecurityGroup{balancer},
		VpcSubnets:       &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC},
	})
	nlb.AddListener(jsii.String("Proxy"), &awselasticloadbalancingv2.BaseNetworkListenerProps{
		Port: jsii.Number(EgressProxyPort), Protocol: awselasticloadbalancingv2.Protocol_TCP,
	}).AddTargets(jsii.String("Proxy"), &awselasticloadbalancingv2.AddNetworkTargetsProps{
		Port:             jsii.Number(EgressProxyPort),
		Protocol:         awselasticloadbalancingv2.Protocol_TCP,
		PreserveClientIp: jsii.Bool(true),
		Targets: &[]awselasticloadbalancingv2.INetworkLoadBalancerTarget{service.LoadBalancerTarget(&awsecs.LoadBalancerTargetOptions{
			ContainerName: jsii.String(EgressProxyContainer), ContainerPort: jsii.Number(EgressProxyPort),
		})},
	})
	url := awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("http://"), nlb.LoadBalancerDnsName(), jsii.String(":3128")})
	awscdk.NewCfnOutput(st, jsii.String("EgressProxyRepositoryUri"), &awscdk.CfnOutputProps{Value: repo.RepositoryUri()})
	return egress{isolated: isolated, proxyURL: url, cluster: cluster, endpoints: endpoints}
}

// grantEgressProxy lets the proxy read what it decides by: sessions, the
// addresses of their tasks, agent types and warm pool sandboxes, apps'
// secrets; and append egress.denied events to sessions.
func (s *Stack) grantEgressProxy(role awsiam.Role) {
	for table, actions := range map[string][]string{
		access.Sessions:    {access.GetItem, access.UpdateItem},
		access.Events:      {access.PutItem},
		access.Idempotency: {access.GetItem},
		access.Registry:    {access.GetItem, access.Query},
	} {
		arn := s.Tables[s.name(table)].TableArn()
		resources := []*string{arn}
		for _, idx := range s.indexes(s.name(table)) {
			resources = append(resources, jsii.String(*arn+"/index/"+idx))
		}
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(actions...),
			Resources: &resources,
		}))
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
		Resources: &[]*string{s.appSecrets()},
	}))
}

// appSecrets is the ARN pattern of the apps' secrets
// (resources.Set.SecretsPrefix: ra/<env>/secrets/<app>/<name>, and
// Secrets Manager's random suffix).
func (s *Stack) appSecrets() *string {
	return s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("secretsmanager"),
		Resource:     jsii.String("secret"),
		ResourceName: jsii.String(s.Set.SecretsPrefix() + "*"),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// grantAppSecrets lets the secrets routes' function keep the apps'
// secrets: under their prefix, and listing (which Secrets Manager grants
// on every secret or none; the list is filtered by that prefix).
func (s *Stack) grantAppSecrets(fn string) {
	f := s.Functions[fn]
	f.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("secretsmanager:CreateSecret", "secretsmanager:PutSecretValue", "secretsmanager:GetSecretValue",
			"secretsmanager:DeleteSecret", "secretsmanager:TagResource"),
		Resources: &[]*string{s.appSecrets()},
	}))
	f.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("secretsmanager:ListSecrets"),
		Resources: jsii.Strings("*"),
	}))
}

// suppressEgressFindings records the findings of the egress proxy's
// resources that the stack accepts, and why.
func (s *Stack) suppressEgressFindings(suppress func(constructs.IConstruct, bool, ...*cdknag.NagPackSuppression), child func(string) constructs.IConstruct) {
	suppress(child("EgressCASecret"), false, finding("AwsSolutions-SMG4",
		"Every running sandbox trusts the certificate authority derived from it: rotating it would break their TLS to the hosts "+
			"their secrets go to until they restart. An operator rotates it (put-secret-value) between deployments."))
	suppress(child("EgressProxyTask"), true,
		finding("AwsSolutions-ECS2", "The proxy's environment is where the platform's resources are (RA_ENV, queues, the secret's ARN): nothing secret."),
		finding("AwsSolutions-IAM5", "The execution role's ecr:GetAuthorizationToken, which takes no resource ARN (the image pull itself is on the "+
			"repository's ARN).", "Resource::*"))
	suppress(child("EgressProxyTaskRole"), true, finding("AwsSolutions-IAM5",
		"The proxy reads the apps' secrets, named by the apps, only under their prefix ("+s.Set.SecretsPrefix()+"*), to add them to the requests their rules name.",
		"Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"+s.Set.SecretsPrefix()+"*"))
	suppress(child("EgressProxyBalancer"), false, finding("AwsSolutions-ELB2",
		"A TCP listener: a Network Load Balancer logs TLS listeners only; who reached what is in the proxy's own log (its denials) and the VPC's flow log."))
}
