package process_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/egressproxy"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/process"
)

// TestIsolatedSandboxReachesOnlyThePlatformAndItsProxy runs, in an isolated
// sandbox, what a program there would try: the platform at its address,
// an allowed server through the proxy, the same server and others without
// it (as a program that ignores proxy variables does), and another address
// through the proxy.
func TestIsolatedSandboxReachesOnlyThePlatformAndItsProxy(t *testing.T) {
	if err := process.CanIsolate(); err != nil {
		// Not root (a developer's machine): what holds then is that an
		// isolated launch fails, closed. CI runs as root, and checks the rest.
		l, err := process.New(process.Options{Command: []string{"/bin/true"}, Dir: t.TempDir(), Network: &process.Network{Proxy: "127.0.0.1:3128", Serve: func(net.Listener, string) {}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "iso", Generation: 1, Isolated: true}); err == nil || len(l.Running()) != 0 {
			t.Fatalf("an isolated launch where no network namespace can be made: %v, running %v", err, l.Running())
		}
		return
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed:", err)
	}
	hello := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
	}
	platform, allowed := hello("platform"), hello("allowed")
	defer platform.Close()
	defer allowed.Close()
	platformAddr, allowedAddr := strings.TrimPrefix(platform.URL, "http://"), strings.TrimPrefix(allowed.URL, "http://")
	_, allowedPort, _ := net.SplitHostPort(allowedAddr)

	denials := make(chan egressproxy.Denial, 8)
	proxy := egressproxy.New(egressproxy.Options{
		Lookup: func(_ context.Context, id string) (egressproxy.Grant, error) {
			if id != "iso" {
				return egressproxy.Grant{}, egressproxy.ErrUnknown
			}
			return egressproxy.Grant{Policy: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{allowedAddr}}}, nil
		},
		Denied:   func(d egressproxy.Denial) { denials <- d },
		Platform: []string{platformAddr},
	})
	script := `
try() { printf '%s %s\n' "$1" "$(shift; curl -s -m 5 -o /dev/null -w '%{http_code}' "$@")" >> results; }
try platform "http://` + platformAddr + `/"
try proxied "http://` + allowedAddr + `/"
try direct --noproxy '*' "http://` + allowedAddr + `/"
try other-loopback "http://127.0.0.2:` + allowedPort + `/"
try raw-ip --noproxy '*' "http://192.0.2.1:80/"
try raw-ip-proxied "http://192.0.2.1:80/"
if (exec 3<>/dev/tcp/127.0.0.1/` + allowedPort + `) 2>/dev/null; then echo "devtcp 200" >> results; else echo "devtcp 000" >> results; fi
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > interfaces
echo "$HTTPS_PROXY" > proxy
cp "$SSL_CERT_FILE" bundle
`
	dir := t.TempDir()
	ex := make(chan launch.Exit, 1)
	l, err := process.New(process.Options{Command: []string{"/bin/bash", "-c", script}, Dir: dir, KeepEnded: true, OnExit: func(x launch.Exit) { ex <- x },
		Network: &process.Network{Platform: []string{platformAddr}, Proxy: "127.0.0.1:3128", Serve: func(l net.Listener, id string) { _ = proxy.Serve(l, id) }, CA: proxy.CA, Forget: proxy.Forget}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.StopAll(time.Second)
	if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "iso", Generation: 1, Isolated: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-ex:
		if x.ExitCode != 0 {
			t.Fatalf("sandbox exit %+v", x)
		}
	case <-time.After(time.Minute):
		t.Fatal("the sandbox did not finish")
	}
	work := filepath.Join(dir, "iso-1")
	results, _ := os.ReadFile(filepath.Join(work, "results"))
	want := "platform 200\nproxied 200\ndirect 000\nother-loopback 403\nraw-ip 000\nraw-ip-proxied 403\ndevtcp 000\n"
	if string(results) != want {
		t.Errorf("results:\n%s\nwant:\n%s", results, want)
	}
	if ifs, _ := os.ReadFile(filepath.Join(work, "interfaces")); strings.TrimSpace(string(ifs)) != "lo" {
		t.Errorf("interfaces in the sandbox: %q, want lo only", ifs)
	}
	if p, _ := os.ReadFile(filepath.Join(work, "proxy")); strings.TrimSpace(string(p)) != "http://127.0.0.1:3128" {
		t.Errorf("HTTPS_PROXY %q", p)
	}
	// The bundle is the system's certificates, then the sandbox's authority.
	b, _ := os.ReadFile(filepath.Join(work, "bundle"))
	var last *x509.Certificate
	for n := 0; ; n++ {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			if n < 2 {
				t.Errorf("the bundle holds %d certificates", n)
			}
			break
		}
		last, _ = x509.ParseCertificate(block.Bytes)
	}
	if last == nil || !last.IsCA || !strings.HasSuffix(last.Subject.CommonName, "sandbox iso") {
		t.Errorf("the bundle's last certificate is not the sandbox's authority: %v", last)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case d := <-denials:
			got[d.Host+":"+strconv.Itoa(d.Port)] = d.Sandbox == "iso" && d.Reason == egressproxy.DenyNotAllowed
		case <-time.After(10 * time.Second):
			t.Fatalf("denials: %v", got)
		}
	}
	if !got["127.0.0.2:"+allowedPort] || !got["192.0.2.1:80"] {
		t.Errorf("denials: %v", got)
	}
}

func TestIsolationFailsClosed(t *testing.T) {
	l, err := process.New(process.Options{Command: []string{"/bin/true"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Launch(t.Context(), launch.Spec{SessionID: "x", Generation: 1, Isolated: true})
	if !errors.Is(err, launch.ErrIsolationUnavailable) || !strings.Contains(err.Error(), "cannot cut a sandbox off") {
		t.Fatalf("an isolated launch without a network: %v", err)
	}
	if len(l.Running()) != 0 {
		t.Fatal("it started anyway")
	}
}
