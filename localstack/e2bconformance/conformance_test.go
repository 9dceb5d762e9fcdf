package e2bconformance

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// EnvSDK names an SDK package folder to run the suite with instead of the
// pinned ones (make e2b-latest: e2b@latest).
const EnvSDK = "RA_E2B_SDK"

// TestE2BConformance runs the suite once per SDK version, each against a
// dev server of its own.
func TestE2BConformance(t *testing.T) {
	sdks := map[string]string{}
	if dir := os.Getenv(EnvSDK); dir != "" {
		sdks["from "+EnvSDK] = dir
	} else {
		for _, v := range []string{"2.45", "2.51"} {
			dir, err := filepath.Abs(filepath.Join("..", "node_modules", "e2b-"+v))
			if err != nil {
				t.Fatal(err)
			}
			sdks["e2b "+v] = dir
		}
	}
	for name, dir := range sdks {
		// One at a time: each suite loads the machine as a user's script
		// would, its timings those of one client.
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
				t.Fatalf("no SDK at %s (make installs the pinned ones: npm ci in localstack): %v", dir, err)
			}
			// The SDK waits 60 s for a create; a deployment may wait 29
			// (RA_CREATION_TIMEOUT_SECONDS' most), not the 10 other tests
			// take to fail fast.
			srv := devtest.Start(t, devtest.WithSandboxProxy(), devtest.WithCreationTimeout(29*time.Second))
			cmd := exec.CommandContext(t.Context(), "node", "--test", "--test-concurrency=1", "--test-reporter=tap", "conformance.test.mjs")
			cmd.Env = append(os.Environ(), "E2B_SDK="+dir, "E2B_API_URL="+srv.URL+"/e2b", "E2B_SANDBOX_URL="+srv.SandboxProxyURL, "E2B_API_KEY="+devtest.E2BKey)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("the suite with %s:\n%s", dir, out.String())
			if err != nil {
				t.Fatalf("the suite failed: %v", err)
			}
		})
	}
}
