package egresstrust

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// A sandbox told only its proxy asks it for its authority (on the second
// try here: the proxy does not know it at first) and trusts it after the
// system's certificates; one given its certificates by its launcher, or
// with no proxy, is left as it is.
func TestTrust(t *testing.T) {
	asked := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.String() != sandboxwire.EgressCAURL {
			http.Error(w, "not a proxy request for the authority: "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if asked++; asked == 1 {
			http.Error(w, "This sandbox is not known to the egress proxy.", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(pem))
	}))
	defer proxy.Close()
	t.Setenv("SSL_CERT_FILE", "")
	dir := t.TempDir()
	environ := []string{"PATH=/bin", "HTTPS_PROXY=" + proxy.URL}
	got, err := Trust(t.Context(), environ, filepath.Join(dir, "egress"))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "egress", "ca-bundle.pem")
	if !slices.Contains(got, "SSL_CERT_FILE="+bundle) || !slices.Contains(got, "NODE_EXTRA_CA_CERTS="+filepath.Join(dir, "egress", "egress-ca.pem")) || os.Getenv("SSL_CERT_FILE") != bundle {
		t.Errorf("environ %v, own SSL_CERT_FILE %q", got, os.Getenv("SSL_CERT_FILE"))
	}
	b, err := os.ReadFile(bundle)
	if err != nil || !strings.HasSuffix(string(b), pem) {
		t.Errorf("bundle %q, %v", b, err)
	}
	if info, err := os.Stat(bundle); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the bundle is not readable by the sandbox's commands: %v %v", info, err)
	}
	for _, env := range [][]string{{"PATH=/bin"}, {"HTTPS_PROXY=" + proxy.URL, "SSL_CERT_FILE=/given.pem"}} {
		if got, err := Trust(t.Context(), env, filepath.Join(dir, "other")); err != nil || !slices.Equal(got, env) {
			t.Errorf("Trust(%v) = %v, %v", env, got, err)
		}
	}
}
