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
	"github.com/remote-agents/remote-agents/shared/session"
)

// TestJobsUnderTheFargateProfile runs jobs in sandboxes with a Fargate
// task's rights (Docker's default capabilities, no_new_privs), where no
// network namespace can be made. A job without network whose profile has
// bash runs in a sandbox its launcher cut off from every network (egress
// none: on AWS, the isolated security group and the proxy; here, a network
// namespace the launcher made): bash runs, confined to its directory, and
// reaches nothing, directly or through its proxy. A job with network runs bash the same way and reaches
// the network it was given. Either way bash reads its input and writes its
// output, but reads neither a file outside its job nor the agent's
// environment.
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
		`{"text":"net","tool_calls":[` + bash("if (exec 3<>/dev/tcp/"+strings.Replace(listener.Addr().String(), ":", "/", 1)+") 2>/dev/null; then echo reached; else echo unreachable; fi > output/net.txt") + `]}`,
		// Through the proxy a sandbox cut off has: refused (the job's policy
		// allows nothing); a job with network has none.
		`{"text":"proxy","tool_calls":[` + bash(`if [ -n "$HTTP_PROXY" ]; then p=${HTTP_PROXY#http://}; p=${p%/}; exec 3<>/dev/tcp/${p%:*}/${p##*:} && `+
			`printf 'GET http://`+listener.Addr().String()+`/ HTTP/1.0\r\n\r\n' >&3 && head -n1 <&3 | tr -d '\r'; else echo none; fi > output/proxy.txt`) + `]}`,
		`{"text":"Done."}`,
	}, "\n") + "\n"
	// The model's script beside the secret: the agent reads it, bash may not.
	if err := os.WriteFile(filepath.Join(secrets, "script.jsonl"), []byte(steps), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, append(opts, withSandboxEnv("RA_LLM_SCRIPT="+filepath.Join(in, "script.jsonl"), "RA_NO_TMUX=1"))...)
	o := newOrchestrator(s)
	agent := o.shellProfile(t)

	for _, network := range []bool{false, true} {
		what := map[bool]string{false: "the job without network", true: "the job with network"}[network]
		id, step, job := o.runJob(t, agent, network)
		got := s.jobOutputs(t, o, id, step)
		if job.str("status") != "completed" || !strings.Contains(got["output/copy.json"], "write two files") {
			t.Fatalf("%s: %s; outputs %v (sandbox log %s)", what, job.raw, got, s.sandboxLog(t, s.jobSession(t, id)))
		}
		if strings.Contains(got["output/leak.txt"], "top secret") {
			t.Errorf("%s: bash read a file outside its job", what)
		}
		if env := got["output/environ.txt"]; strings.Contains(env, "RA_BOOTSTRAP") || strings.Contains(env, "RA_SANDBOX") || strings.Contains(env, "PROLIFERATE_SESSION") {
			t.Errorf("%s: bash read the agent's environment: %q", what, env)
		}
		if uid := strings.TrimSpace(got["output/uid.txt"]); uid == "" || uid == "0" {
			t.Errorf("%s: bash ran as uid %q, want the tools' user", what, uid)
		}
		if st := got["output/status.txt"]; !strings.Contains(st, "CapEff:\t0000000000000000") || !strings.Contains(st, "NoNewPrivs:\t1") {
			t.Errorf("%s: bash's rights: %q, want none and no_new_privs", what, st)
		}
		if want := map[bool]string{true: "image\n", false: "host\n"}[rootfs != ""]; got["output/where.txt"] != want {
			t.Errorf("%s: bash ran on the %q, want %q", what, got["output/where.txt"], want)
		}
		if want := map[bool]string{true: "reached\n", false: "unreachable\n"}[network]; got["output/net.txt"] != want {
			t.Errorf("%s: bash reaching the network wrote %q, want %q (log %s)", what, got["output/net.txt"], want, got["logs/job.log"])
		}
		if px := got["output/proxy.txt"]; network && px != "none\n" || !network && !strings.HasSuffix(px, " 403 Forbidden\n") {
			t.Errorf("%s: bash through its proxy got %q, want none with network, 403 without (log %s)", what, px, got["logs/job.log"])
		}
	}
}

// TestJobsRefusedWhereIsolationIsUnavailable: where the launcher cannot cut
// a sandbox off from the network (locally: no network namespaces; on AWS: a
// stack without the egress proxy), a job without network whose profile has
// bash is not launched open: it fails before anything runs,
// policy_violation, and says why on the job and in its AGENT.JOB.FAILED
// event; no sandbox runs for it.
func TestJobsRefusedWhereIsolationIsUnavailable(t *testing.T) {
	t.Parallel()
	s := start(t, devtest.WithSandboxProfile(process.ProfileFargate), devtest.WithoutEgressIsolation())
	o := newOrchestrator(s)
	id, _, job := o.runJob(t, o.shellProfile(t), false)
	failure, _ := job.body["failure"].(map[string]any)
	if msg, _ := failure["message"].(string); job.str("status") != "failed" || failure["category"] != "policy_violation" ||
		!strings.HasPrefix(msg, "Isolation unavailable, so nothing ran: this launcher cannot cut a sandbox off from the network") {
		t.Errorf("a job without network where isolation is unavailable: %s", job.raw)
	}
	evs := s.jobEvents(t, id, 2)
	wantTypes(t, evs, jobevents.Created, jobevents.Failed)
	var d jobevents.Detail
	if err := json.Unmarshal(evs[1].Detail, &d); err != nil || d.Metadata == nil || d.Metadata.Failure == nil || d.Metadata.Failure.Category != "policy_violation" ||
		!strings.HasPrefix(d.Metadata.Failure.Message, "Isolation unavailable") {
		t.Errorf("AGENT.JOB.FAILED detail %s", evs[1].Detail)
	}
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), s.jobSession(t, id))
	if err != nil || sess.State != session.Failed || sess.Reason != session.ReasonLaunchFailed || sess.SandboxRef != "" {
		t.Errorf("the job's session: %s (%s), sandbox %q, %v: want failed at launch, no sandbox", sess.State, sess.Reason, sess.SandboxRef, err)
	}
	if running := s.srv.Launcher.Running(); len(running) != 0 {
		t.Errorf("sandboxes %v run", running)
	}
}
