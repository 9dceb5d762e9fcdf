package stack

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// egressRules are the egress rules of security group id: its inline ones
// and its AWS::EC2::SecurityGroupEgress resources.
func (tp *template) egressRules(id string) []map[string]any {
	var out []map[string]any
	if inline, ok := props(tp.res[id])["SecurityGroupEgress"].([]any); ok {
		for _, r := range inline {
			out = append(out, r.(map[string]any))
		}
	}
	for _, r := range tp.byType("AWS::EC2::SecurityGroupEgress") {
		if ref(props(r)["GroupId"]) == id {
			out = append(out, props(r))
		}
	}
	return out
}

// TestIsolatedSandboxesReachOnlyTheProxyAndThePlatform (issue 30): the
// security group of sandboxes cut off from the network has no egress but
// the egress proxy's load balancer and the VPC's endpoints a task starts
// with (ECR, S3, CloudWatch Logs; the platform's own routes go through the
// proxy, which allows them whatever the policy); the balancer forwards to
// the proxy only, keeping the sandbox's address; the workers launch with it.
func TestIsolatedSandboxesReachOnlyTheProxyAndThePlatform(t *testing.T) {
	for env, tp := range synth(t) {
		isolated, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "Sandboxes cut off from the network: the egress proxy and the VPC endpoints only")
		balancer, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "The egress proxy load balancer: isolated sandboxes in, the proxy out")
		endpoints, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "The VPC interface endpoints (ECR, S3, CloudWatch Logs): HTTPS from sandboxes")
		proxy, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription",
			"The egress proxy: sandbox connections in (through its load balancer), the destinations their policies allow out")
		got := map[string]bool{}
		for _, r := range tp.egressRules(isolated) {
			if r["CidrIp"] != nil || r["CidrIpv6"] != nil || r["DestinationPrefixListId"] != nil {
				t.Errorf("%s: the isolated sandboxes reach %v", env, r)
			}
			got[fmt.Sprintf("%s:%v-%v", ref(r["DestinationSecurityGroupId"]), r["FromPort"], r["ToPort"])] = true
		}
		want := map[string]bool{balancer + ":3128-3128": true, endpoints + ":443-443": true}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the isolated sandboxes' egress %v, want %v", env, got, want)
		}
		// The proxy's tasks start through the endpoints too.
		admitted := false
		for _, r := range tp.ingressRules(endpoints) {
			admitted = admitted || (ref(r["SourceSecurityGroupId"]) == proxy && r["FromPort"] == float64(443))
		}
		if !admitted {
			t.Errorf("%s: the VPC endpoints do not let the egress proxy's tasks in (their image, their logs)", env)
		}
		for _, r := range tp.egressRules(balancer) {
			if ref(r["DestinationSecurityGroupId"]) != proxy || r["FromPort"] != float64(3128) {
				t.Errorf("%s: the balancer reaches %v", env, r)
			}
		}
		_, lb := tp.find(t, "AWS::ElasticLoadBalancingV2::LoadBalancer", "Name", "ra-"+env+"-egress")
		if props(lb)["Scheme"] != "internal" || props(lb)["Type"] != "network" {
			t.Errorf("%s: the egress proxy's balancer is %v %v", env, props(lb)["Scheme"], props(lb)["Type"])
		}
		for _, r := range tp.byType("AWS::ElasticLoadBalancingV2::TargetGroup") {
			if props(r)["Protocol"] != "TCP" {
				continue // an application balancer's (the sandbox proxy's)
			}
			attrs := fmt.Sprint(props(r)["TargetGroupAttributes"])
			if props(r)["TargetType"] != "ip" || !containsAll(attrs, "preserve_client_ip.enabled", "true") {
				t.Errorf("%s: the proxy's targets %v, attributes %s: not by IP with the client's address kept", env, props(r)["TargetType"], attrs)
			}
		}
		_, worker := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-"+env+"-jobworker")
		vars, _ := props(worker)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if ref(vars["RA_ECS_ISOLATED_SECURITY_GROUPS"]) != isolated || vars["RA_EGRESS_PROXY_URL"] == nil {
			t.Errorf("%s: jobworker launches isolated sandboxes with %v through %v", env, vars["RA_ECS_ISOLATED_SECURITY_GROUPS"], vars["RA_EGRESS_PROXY_URL"])
		}
		// Where a task runs is known from its RUNNING event.
		found := false
		for _, r := range tp.byType("AWS::Events::Rule") {
			if fmt.Sprint(props(r)["EventPattern"]) != "" && containsAll(fmt.Sprint(props(r)["EventPattern"]), "RUNNING", "STOPPED") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no rule sends sandbox tasks' RUNNING events", env)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(s, p) })
}

// TestEgressCASecretIsTheProxysAlone: the secret the proxy's replicas derive
// sandboxes' authorities from is generated at deploy and read by the
// proxy's task role alone; the apps' secrets by it and the secrets routes'
// function.
func TestEgressCASecretIsTheProxysAlone(t *testing.T) {
	for env, tp := range synth(t) {
		id, secret := tp.find(t, "AWS::SecretsManager::Secret", "Name", "ra/"+env+"/egress-ca")
		if props(secret)["GenerateSecretString"] == nil {
			t.Errorf("%s: the authorities' secret is not generated", env)
		}
		for role, grants := range tp.grantsOf("secretsmanager:") {
			for _, g := range grants {
				if strings.Contains(g, "${"+id+"}") && !strings.HasPrefix(role, "EgressProxyTaskRole") {
					t.Errorf("%s: %s may %s", env, role, g)
				}
				if strings.Contains(g, "secret:ra/"+env+"/secrets/*") && role != AppSecretsFunction && !strings.HasPrefix(role, "EgressProxyTaskRole") {
					t.Errorf("%s: %s may %s", env, role, g)
				}
			}
		}
	}
}
