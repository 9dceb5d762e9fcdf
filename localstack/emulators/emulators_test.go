package emulators_test

import (
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/emulators"
)

func TestStartServesAndStopLeavesNoProcess(t *testing.T) {
	emu, err := emulators.Start(t.Context(), emulators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Stop() })

	for _, url := range []string{emu.DynamoDB, emu.SQS, emu.S3} {
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Errorf("endpoint %q is not on loopback", url)
		}
		res, err := http.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		_ = res.Body.Close()
	}
	env := strings.Join(emu.Env(), "\n")
	for _, want := range []string{"AWS_ENDPOINT_URL_DYNAMODB=" + emu.DynamoDB, "AWS_ENDPOINT_URL_SQS=" + emu.SQS, "AWS_ENDPOINT_URL_S3=" + emu.S3} {
		if !strings.Contains(env, want) {
			t.Errorf("Env() lacks %s", want)
		}
	}

	pids := emu.Pids()
	if err := emu.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := emu.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	for _, pid := range pids {
		// Signal 0 probes: ESRCH means no such process (nor a zombie: Wait reaped it).
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (%v)", pid, err)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after Stop (%v)", pid, err)
		}
	}
}
