package sandboxwire

import (
	"net/netip"
	"strings"
	"testing"
)

// TestSecurityInternalAddresses (issue 19): what a sandbox must not reach on
// a model's or an app's behalf, in every spelling the dialler may meet.
func TestSecurityInternalAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what string
		ips  []string
	}{
		{"link-local metadata (AWS, GCP, Azure, ECS task credentials)", []string{"169.254.169.254", "169.254.170.2", "169.254.0.1"}},
		{"AWS's IPv6 metadata (unique local)", []string{"fd00:ec2::254"}},
		{"loopback", []string{"127.0.0.1", "127.255.255.254", "::1"}},
		{"10/8", []string{"10.0.0.0", "10.1.2.3", "10.255.255.255"}},
		{"172.16/12", []string{"172.16.0.0", "172.20.1.1", "172.31.255.255"}},
		{"192.168/16", []string{"192.168.0.1", "192.168.255.255"}},
		{"fc00::/7", []string{"fc00::1", "fdff:ffff::1"}},
		{"IPv6 link-local", []string{"fe80::1", "fe80::1%eth0"}},
		{"IPv4-mapped IPv6", []string{"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:192.168.1.1"}},
		{"IPv4-compatible and NAT64 IPv6", []string{"::127.0.0.1", "::a9fe:a9fe", "64:ff9b::a9fe:a9fe", "64:ff9b::10.0.0.1"}},
		{"unspecified", []string{"0.0.0.0", "::", "0.1.2.3"}},
		{"carrier-grade NAT, reserved, broadcast, multicast", []string{"100.64.0.1", "100.127.255.255", "198.18.0.1", "240.0.0.1", "255.255.255.255", "224.0.0.1", "ff02::1"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			for _, s := range tc.ips {
				if !InternalAddress(netip.MustParseAddr(s)) {
					t.Errorf("%s is not internal", s)
				}
			}
			t.Logf("checked: %s internal", strings.Join(tc.ips, ", "))
		})
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "140.82.112.3", "172.32.0.1", "172.15.255.255", "192.169.0.1", "100.128.0.1", "169.255.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		if InternalAddress(netip.MustParseAddr(s)) {
			t.Errorf("public %s is internal", s)
		}
	}
	if !InternalAddress(netip.Addr{}) {
		t.Error("an invalid address passes")
	}
	t.Logf("checked: public addresses (and the edges of each range) pass; an invalid address fails closed")
}

// TestSecurityCloneURLsNamingInternalHosts: a workspace's repository URL
// (create's task_context, an agent type's fixed repository, checked again in
// the sandbox) that names an internal address or a localhost name is refused,
// over https too, unless the operator lists that host (git_insecure_hosts).
func TestSecurityCloneURLsNamingInternalHosts(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"https://169.254.169.254/latest/meta-data.git", "https://169.254.170.2/v2/credentials", "https://[fd00:ec2::254]/x.git",
		"https://127.0.0.1/org/repo", "https://127.0.0.1:8443/org/repo", "https://[::1]/org/repo", "https://[::ffff:127.0.0.1]/org/repo",
		"https://[::ffff:a9fe:a9fe]/x", "https://10.0.0.1/org/repo", "https://172.16.5.4/org/repo", "https://192.168.1.1/org/repo",
		"https://[fc00::1]/org/repo", "https://[fe80::1]/org/repo", "https://0.0.0.0/org/repo", "https://localhost/org/repo",
		"https://LOCALHOST/org/repo", "https://git.localhost/org/repo", "http://169.254.169.254/x", "git://10.0.0.1/x",
	} {
		err := CheckCloneURL(raw, nil)
		if err == nil {
			t.Errorf("%s accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), "://") {
			t.Errorf("%s: the error repeats the URL: %v", raw, err)
		}
	}
	t.Logf("checked: metadata, loopback, private, unique-local, link-local, v4-mapped and localhost hosts are refused with no host listed")
	listed := []string{"127.0.0.1", "10.0.0.5", "::1", "localhost"}
	for _, raw := range []string{"https://127.0.0.1:8443/org/repo", "http://10.0.0.5/org/repo", "https://[::1]/org/repo", "http://localhost:3000/app.git", "https://github.com/org/repo"} {
		if err := CheckCloneURL(raw, listed); err != nil {
			t.Errorf("%s, its host listed: %v", raw, err)
		}
	}
	if err := CheckCloneURL("https://10.0.0.6/org/repo", listed); err == nil {
		t.Error("10.0.0.6 accepted: only 10.0.0.5 is listed")
	}
	t.Logf("checked: a listed internal host is allowed (the operator's config), an unlisted neighbour is not")
}
