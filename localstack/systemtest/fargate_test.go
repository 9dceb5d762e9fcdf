package systemtest_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/launch/process"
)

// TestJobsUnderTheFargateProfile runs jobs in sandboxes with a Fargate
// task's rights (Docker's default capabilities, no_new_privs). A job
// without network whose profile has bash cannot get a network namespace
// there and nothing vouches for the sandbox's isolation: it fails before
// any tool runs, policy_violation, and says why on the job and in its
// AGENT.JOB.FAILED event. A job with network runs bash confined to its
// directory: it reads its input and writes its output, but reads neither a
// file outside its job nor the agent's environment, and reaches the
// network it was given.
func TestJobsUnderTheFargateProfile(t *testing.T) {
	t.Parallel()
	jobsUnderTheFargateProfile(t, t.TempDir(), "")
}

// jobsUnderTheFargateProfile runs TestJobsUnderTheFargateProfile's jobs in
// the image whose root filesystem is rootfs ("": the host's), with the
// secret bash must not read, and the model's script, in secrets (a folder
// of the host), which the sandbox sees as in (a folder of its own root).
func jobsUnderTheFargateProfile(t *testing.T, secrets, rootfs string) {
	opts := []option{devtest.WithSandboxProfile(process.ProfileFargate)}
	in := secrets
	if rootfs != "" {
		opts = append(opts, devtest.WithSandboxImage(rootfs))
		rel, err := filepath.Rel(rootfs, secrets)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("secrets %s are not in the image's root %s", secrets, rootfs)
		}
		in = "/" + rel
	}
	secret := filepath.Join(secrets, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = listener.Close() }()
	bash := bashCall
	steps := strings.Join([]string{
		`{"text":"copy","tool_calls":[` + bash("cat input/input.json > output/copy.json") + `]}`,
		`{"text":"peek","tool_calls":[` + bash("cat "+filepath.Join(in, "secret.txt")+" > output/leak.txt") + `]}`,
		`{"text":"environ","tool_calls":[` + bash("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a RA_ > output/environ.txt") + `]}`,
		`{"text":"whoami","tool_calls":[` + bash("id -u > output/uid.txt; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status > output/status.txt") + `]}`,
		`{"text":"where","tool_calls":[` + bash("if test -x "+process.ImageAgent+"; then echo image; else echo host; fi > output/where.txt") + `]}`,
		`{"text":"net","tool_calls":[` + bash("exec 3<>/dev/tcp/"+strings.Replace(listener.Addr().String(), ":", "/", 1)+" && echo reached > output/net.txt") + `]}`,
		`{"text":"Done."}`,
	}, "\n") + "\n"
	// The model's script beside the secret: the agent reads it, bash may not.
	if err := os.WriteFile(filepath.Join(secrets, "script.jsonl"), []byte(steps), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, append(opts, withSandboxEnv("RA_LLM_SCRIPT="+filepath.Join(in, "script.jsonl"), "RA_NO_TMUX=1"))...)
	o := newOrchestrator(s)
	agent := o.shellProfile(t)

	// No network, bash, no namespace to be had: refused, not run.
	id, _, job := o.runJob(t, agent, false)
	failure, _ := job.body["failure"].(map[string]any)
	if msg, _ := failure["message"].(string); job.str("status") != "failed" || failure["category"] != "policy_violation" || !strings.HasPrefix(msg, "Isolation unavailable") {
		t.Errorf("a job without network under the fargate profile: %s (sandbox log %s)", job.raw, s.sandboxLog(t, s.jobSession(t, id)))
	}
	evs := s.jobEvents(t, id, 3)
	wantTypes(t, evs, jobevents.Created, jobevents.Started, jobevents.Failed)
	var d jobevents.Detail
	if err := json.Unmarshal(evs[2].Detail, &d); err != nil || d.Metadata == nil || d.Metadata.Failure == nil || d.Metadata.Failure.Category != "policy_violation" ||
		!strings.HasPrefix(d.Metadata.Failure.Message, "Isolation unavailable") {
		t.Errorf("AGENT.JOB.FAILED detail %s", evs[2].Detail)
	}
	if log := s.sandboxLog(t, s.jobSession(t, id)); !strings.Contains(log, "isolation cannot be had") {
		t.Errorf("the sandbox's log does not say why:\n%s", log)
	}

	// With network: bash runs, confined, as the tools' user.
	id, step, job := o.runJob(t, agent, true)
	got := s.jobOutputs(t, o, id, step)
	if job.str("status") != "completed" || !strings.Contains(got["output/copy.json"], "write two files") {
		t.Fatalf("the job with network: %s; outputs %v (sandbox log %s)", job.raw, got, s.sandboxLog(t, s.jobSession(t, id)))
	}
	if strings.Contains(got["output/leak.txt"], "top secret") {
		t.Error("bash read a file outside its job")
	}
	if env := got["output/environ.txt"]; strings.Contains(env, "RA_BOOTSTRAP") || strings.Contains(env, "RA_SANDBOX") || strings.Contains(env, "PROLIFERATE_SESSION") {
		t.Errorf("bash read the agent's environment: %q", env)
	}
	if uid := strings.TrimSpace(got["output/uid.txt"]); uid == "" || uid == "0" {
		t.Errorf("bash ran as uid %q, want the tools' user", uid)
	}
	if st := got["output/status.txt"]; !strings.Contains(st, "CapEff:\t0000000000000000") || !strings.Contains(st, "NoNewPrivs:\t1") {
		t.Errorf("bash's rights: %q, want none and no_new_privs", st)
	}
	if want := map[bool]string{true: "image\n", false: "host\n"}[rootfs != ""]; got["output/where.txt"] != want {
		t.Errorf("bash ran on the %q, want %q", got["output/where.txt"], want)
	}
	if got["output/net.txt"] != "reached\n" {
		t.Errorf("a job with network did not reach it: %q (log %s)", got["output/net.txt"], got["logs/job.log"])
	}
}
