package stack

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/config"
)

// ingressRules are the ingress rules of security group id: its inline ones
// and its AWS::EC2::SecurityGroupIngress resources.
func (tp *template) ingressRules(id string) []map[string]any {
	var out []map[string]any
	if inline, ok := props(tp.res[id])["SecurityGroupIngress"].([]any); ok {
		for _, r := range inline {
			out = append(out, r.(map[string]any))
		}
	}
	for _, r := range tp.byType("AWS::EC2::SecurityGroupIngress") {
		if ref(props(r)["GroupId"]) == id {
			out = append(out, props(r))
		}
	}
	return out
}

// rule renders a security group rule as "<peer>:<from>-<to>", its peer a
// group's logical id or a CIDR.
func rule(r map[string]any) string {
	peer := ref(r["SourceSecurityGroupId"]) + ref(r["DestinationSecurityGroupId"])
	if peer == "" {
		peer = fmt.Sprint(r["CidrIp"])
	}
	return fmt.Sprintf("%s:%v-%v", peer, r["FromPort"], r["ToPort"])
}

func rules(rs []map[string]any) []string {
	var out []string
	for _, r := range rs {
		if r["IpProtocol"] != "tcp" {
			out = append(out, "not tcp: "+rule(r))
			continue
		}
		out = append(out, rule(r))
	}
	slices.Sort(out)
	return out
}

// TestSandboxProxyService (issue 33): the sandbox proxy runs on Fargate in
// the platform services' cluster (the egress proxy's, not the sandboxes'),
// behind an internet-facing Application Load Balancer whose idle timeout
// lets envd's streams be silent an hour; its health is checked on a port
// of its own (every path of the proxy's is a sandbox's); its URL is an
// output.
func TestSandboxProxyService(t *testing.T) {
	for env, tp := range synth(t) {
		_, svc := tp.find(t, "AWS::ECS::Service", "ServiceName", "ra-"+env+"-sandbox-proxy")
		_, egress := tp.find(t, "AWS::ECS::Service", "ServiceName", "ra-"+env+"-egress-proxy")
		if ref(props(svc)["Cluster"]) == "" || ref(props(svc)["Cluster"]) != ref(props(egress)["Cluster"]) {
			t.Errorf("%s: the sandbox proxy runs in %v, the egress proxy in %v", env, props(svc)["Cluster"], props(egress)["Cluster"])
		}
		if n := props(svc)["DesiredCount"]; n != float64(2) {
			t.Errorf("%s: %v tasks", env, n)
		}
		lbs := fmt.Sprint(props(svc)["LoadBalancers"])
		if !containsAll(lbs, "ContainerName:"+SandboxProxyContainer, "ContainerPort:8080") {
			t.Errorf("%s: the service's targets %s", env, lbs)
		}

		_, td := tp.find(t, "AWS::ECS::TaskDefinition", "Family", "ra-"+env+"-sandbox-proxy")
		secretID, _ := tp.find(t, "AWS::SecretsManager::Secret", "Name", "ra/"+env+"/e2b-token")
		vars := map[string]any{}
		for _, c := range props(td)["ContainerDefinitions"].([]any) {
			for _, kv := range c.(map[string]any)["Environment"].([]any) {
				kv := kv.(map[string]any)
				vars[kv["Name"].(string)] = kv["Value"]
			}
		}
		if ref(vars["RA_E2B_TOKEN_SECRET"]) != secretID || vars["RA_SANDBOX_PROXY_ADDR"] != config.DefaultSandboxProxyAddr ||
			vars["RA_SANDBOX_PROXY_HEALTH_ADDR"] != config.DefaultSandboxProxyHealthAddr || vars["RA_ENV"] != env {
			t.Errorf("%s: the proxy's environment %v", env, vars)
		}

		albID, alb := tp.find(t, "AWS::ElasticLoadBalancingV2::LoadBalancer", "Name", "ra-"+env+"-sandbox-proxy")
		if props(alb)["Scheme"] != "internet-facing" || props(alb)["Type"] != "application" {
			t.Errorf("%s: the sandbox proxy's balancer is %v %v", env, props(alb)["Scheme"], props(alb)["Type"])
		}
		if attrs := fmt.Sprint(props(alb)["LoadBalancerAttributes"]); !containsAll(attrs, "idle_timeout.timeout_seconds", "3600") {
			t.Errorf("%s: the balancer's attributes %s: no hour of idle timeout", env, attrs)
		}
		listeners := 0
		for _, l := range tp.byType("AWS::ElasticLoadBalancingV2::Listener") {
			if ref(props(l)["LoadBalancerArn"]) != albID {
				continue
			}
			listeners++
			if props(l)["Port"] != float64(80) || props(l)["Protocol"] != "HTTP" {
				t.Errorf("%s: listener %v %v", env, props(l)["Port"], props(l)["Protocol"])
			}
		}
		if listeners != 1 {
			t.Errorf("%s: %d listeners", env, listeners)
		}
		groups := 0
		for _, tg := range tp.byType("AWS::ElasticLoadBalancingV2::TargetGroup") {
			p := props(tg)
			if p["Protocol"] != "HTTP" {
				continue // the egress proxy's (TCP)
			}
			groups++
			if p["Port"] != float64(8080) || p["TargetType"] != "ip" || p["HealthCheckPort"] != "8081" || p["HealthCheckPath"] != "/" {
				t.Errorf("%s: the proxy's targets: port %v, %v, health checks on %v%v", env, p["Port"], p["TargetType"], p["HealthCheckPort"], p["HealthCheckPath"])
			}
		}
		if groups != 1 {
			t.Errorf("%s: %d HTTP target groups", env, groups)
		}

		out := (*tp.raw.ToJSON())["Outputs"].(map[string]any)
		url, _ := out["SandboxProxyUrl"].(map[string]any)
		if v := fmt.Sprint(url["Value"]); !containsAll(v, "http://", albID, "DNSName") {
			t.Errorf("%s: SandboxProxyUrl %v", env, url)
		}
		if out["SandboxProxyRepositoryUri"] == nil {
			t.Errorf("%s: no SandboxProxyRepositoryUri output", env)
		}
	}
}

// TestOnlyTheSandboxProxyReachesEnvd (issue 33): the sandboxes' security
// groups, open and isolated, let nothing in but the sandbox proxy, on
// envd's port alone (previews go through envd); the proxy is reached
// through its balancer only, which anyone reaches on HTTP.
func TestOnlyTheSandboxProxyReachesEnvd(t *testing.T) {
	for env, tp := range synth(t) {
		open, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "Sandboxes: no inbound traffic, outbound HTTPS only")
		isolated, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "Sandboxes cut off from the network: the egress proxy and the VPC endpoints only")
		proxy, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "The sandbox proxy: its load balancer in; the envd of sandboxes and the AWS APIs out")
		balancer, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "The sandbox proxy load balancer: HTTP from anywhere in, the proxy out")
		endpoints, _ := tp.find(t, "AWS::EC2::SecurityGroup", "GroupDescription", "The VPC interface endpoints (ECR, S3, CloudWatch Logs): HTTPS from sandboxes")
		envd := proxy + ":49983-49983"
		for name, group := range map[string]string{"sandboxes": open, "isolated sandboxes": isolated} {
			if got := rules(tp.ingressRules(group)); !slices.Equal(got, []string{envd}) {
				t.Errorf("%s: the %s let in %v, want %v", env, name, got, []string{envd})
			}
		}
		// No other group lets anything in on envd's port.
		for id := range tp.byType("AWS::EC2::SecurityGroup") {
			for _, r := range tp.ingressRules(id) {
				from, _ := r["FromPort"].(float64)
				to, _ := r["ToPort"].(float64)
				if from <= 49983 && 49983 <= to && ref(r["SourceSecurityGroupId"]) != proxy {
					t.Errorf("%s: %s lets %s in on envd's port", env, id, rule(r))
				}
			}
		}
		wantOut := []string{"0.0.0.0/0:443-443", open + ":49983-49983", isolated + ":49983-49983"}
		slices.Sort(wantOut)
		if got := rules(tp.egressRules(proxy)); !slices.Equal(got, wantOut) {
			t.Errorf("%s: the proxy reaches %v, want %v", env, got, wantOut)
		}
		wantIn := []string{balancer + ":8080-8080", balancer + ":8081-8081"}
		if got := rules(tp.ingressRules(proxy)); !slices.Equal(got, wantIn) {
			t.Errorf("%s: the proxy is reached from %v, want %v", env, got, wantIn)
		}
		if got := rules(tp.ingressRules(balancer)); !slices.Equal(got, []string{"0.0.0.0/0:80-80"}) {
			t.Errorf("%s: the balancer is reached from %v", env, got)
		}
		if got := rules(tp.egressRules(balancer)); !slices.Equal(got, []string{proxy + ":8080-8080", proxy + ":8081-8081"}) {
			t.Errorf("%s: the balancer reaches %v", env, got)
		}
		if got := rules(tp.ingressRules(endpoints)); !slices.Contains(got, proxy+":443-443") {
			t.Errorf("%s: the VPC endpoints let in %v, not the proxy (its image, its logs)", env, got)
		}
	}
}

// TestE2BTokenSecret (issue 33): the secret envd access tokens are derived
// from is generated at deploy, named to the sandbox API's function (which
// mints them) and to the sandbox proxy (which checks them), and read by
// those two alone; the proxy's task reads sessions and, of the idempotency
// table, sandboxes' addresses, and nothing else.
func TestE2BTokenSecret(t *testing.T) {
	for env, tp := range synth(t) {
		id, secret := tp.find(t, "AWS::SecretsManager::Secret", "Name", "ra/"+env+"/e2b-token")
		if props(secret)["GenerateSecretString"] == nil {
			t.Errorf("%s: the envd tokens' secret is not generated", env)
		}
		readers := map[string]bool{}
		for role, grants := range tp.grantsOf("secretsmanager:") {
			for _, g := range grants {
				if strings.Contains(g, "${"+id+"}") {
					if strings.HasPrefix(role, "SandboxProxyTaskRole") {
						role = "SandboxProxyTaskRole"
					}
					readers[role] = true
					if !strings.HasPrefix(g, "secretsmanager:DescribeSecret,secretsmanager:GetSecretValue on") {
						t.Errorf("%s: %s may %s", env, role, g)
					}
				}
			}
		}
		if want := map[string]bool{E2BFunction: true, "SandboxProxyTaskRole": true}; fmt.Sprint(readers) != fmt.Sprint(want) {
			t.Errorf("%s: the secret is read by %v, want %v", env, readers, want)
		}
		_, fn := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-"+env+"-"+E2BFunction)
		vars, _ := props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if ref(vars["RA_E2B_TOKEN_SECRET"]) != id {
			t.Errorf("%s: the e2b function's RA_E2B_TOKEN_SECRET is %v", env, vars["RA_E2B_TOKEN_SECRET"])
		}

		role := ""
		for rid := range tp.byType("AWS::IAM::Role") {
			if strings.HasPrefix(rid, "SandboxProxyTaskRole") {
				role = rid
			}
		}
		tables := map[string]string{}
		for tid, r := range tp.byType("AWS::DynamoDB::Table") {
			tables[tid] = strings.TrimPrefix(props(r)["TableName"].(string), "ra-"+env+"-")
		}
		var got []string
		for _, st := range tp.statements(role) {
			actions := list(st["Action"])
			if slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, "secretsmanager:") }) {
				continue // the secret's, above
			}
			cond := ""
			if c, ok := st["Condition"].(map[string]any); ok {
				cond = " if " + fmt.Sprint(c)
			}
			for _, r := range resourceList(st["Resource"]) {
				got = append(got, strings.Join(actions, ",")+" on "+tables[ref(r)]+cond)
			}
		}
		slices.Sort(got)
		want := []string{
			access.GetItem + " on " + access.Idempotency + " if map[ForAllValues:StringLike:map[dynamodb:LeadingKeys:[" + access.AddressOfItems + "*]]]",
			access.GetItem + " on " + access.Sessions,
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the proxy's task may\n  %s\nwant\n  %s", env, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}
