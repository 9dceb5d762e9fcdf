package jobqueue_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
)

func TestParse(t *testing.T) {
	t.Parallel()
	stopped, err := os.ReadFile("testdata/ecs-task-stopped.json")
	if err != nil {
		t.Fatal(err)
	}
	running := strings.Replace(string(stopped), `"lastStatus": "STOPPED",
    "launchType"`, `"lastStatus": "RUNNING",
    "launchType"`, 1)
	other := strings.Replace(string(stopped), `"group": "ra-gen-2"`, `"group": "service:web"`, 1)
	tests := []struct {
		name    string
		body    string
		want    jobqueue.Message
		wantErr error
	}{
		{"start", `{"type":"session.start","session_id":"s1","generation":1}`, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s1", Generation: 1}, nil},
		{"stop", `{"type":"session.stop","session_id":"s1","generation":3}`, jobqueue.Message{Type: jobqueue.SessionStop, SessionID: "s1", Generation: 3}, nil},
		{"expire", `{"type":"session.expire","session_id":"s1","generation":2,"at":1796044949377}`, jobqueue.Message{Type: jobqueue.SessionExpire, SessionID: "s1", Generation: 2, At: 1796044949377}, nil},
		{"expire without its end", `{"type":"session.expire","session_id":"s1","generation":2}`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"not JSON", `start s1`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"unknown type", `{"type":"session.explode","session_id":"s1","generation":1}`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"unknown field", `{"type":"session.start","session_id":"s1","generation":1,"x":1}`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"no session", `{"type":"session.start","generation":1}`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"no generation", `{"type":"session.start","session_id":"s1"}`, jobqueue.Message{}, jobqueue.ErrMalformed},
		{"ecs running without an address", running, jobqueue.Message{}, jobqueue.ErrIgnored},
		{"ecs other task", other, jobqueue.Message{}, jobqueue.ErrIgnored},
		{"other event", `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{}}`, jobqueue.Message{}, jobqueue.ErrMalformed},
	}
	for _, tt := range tests {
		got, err := jobqueue.Parse(tt.body)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && got != tt.want) {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	// A running sandbox task with its address is task.running: where the
	// egress proxy knows it from.
	withAddr, err := os.ReadFile("testdata/ecs-task-running.json")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := jobqueue.Parse(string(withAddr)); err != nil || m.Type != jobqueue.TaskRunning || m.Addr != "10.0.1.23" || m.Generation != 2 ||
		m.SessionID != "6071cda9-7ba1-431a-9ad4-e711d5ed0a30" || !strings.HasSuffix(m.SandboxRef, "b99d40b3a2a54b0b8c5f2f6f1e0a8c11") {
		t.Errorf("a running task parsed as %+v, %v", m, err)
	}
	m, err := jobqueue.Parse(string(stopped))
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != jobqueue.TaskState || m.SessionID != "6071cda9-7ba1-431a-9ad4-e711d5ed0a30" || m.Generation != 2 ||
		m.ExitCode == nil || *m.ExitCode != 137 || !strings.HasSuffix(m.SandboxRef, "b99d40b3a2a54b0b8c5f2f6f1e0a8c11") {
		t.Errorf("ECS event parsed as %+v", m)
	}
	// An OOM kill is the container's reason, not the task's: the message
	// carries both.
	oom := strings.Replace(string(stopped), `"exitCode": 137,`, `"exitCode": 137,
        "reason": "OutOfMemoryError: Container killed due to memory usage",`, 1)
	if m, err := jobqueue.Parse(oom); err != nil || !launch.OutOfMemory(m.Detail) {
		t.Errorf("an OOM-killed task parsed as %+v (%v): detail without the container's reason", m, err)
	}
	if launch.OutOfMemory(m.Detail) {
		t.Errorf("a task stopped otherwise reads as OOM-killed: %q", m.Detail)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"type":"session.start","session_id":"s1","generation":1}`)
	f.Add(`{"detail-type":"ECS Task State Change","source":"aws.ecs","detail":{"group":"ra-gen-1","startedBy":"s","lastStatus":"STOPPED"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := jobqueue.Parse(body)
		if err == nil && (m.SessionID == "" || m.Generation < 1 || m.Type == "") {
			t.Fatalf("accepted %q as %+v", body, m)
		}
	})
}

func TestParseJobMessages(t *testing.T) {
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"type":"job.run","job_id":"j1"}`, true},
		{`{"type":"job.cancel","job_id":"j1"}`, true},
		{`{"type":"job.sweep"}`, true},
		{`{"type":"job.run"}`, false},
		{`{"type":"job.cancel","job_id":"j1","session_id":"s"}`, false},
		{`{"type":"job.sweep","job_id":"j1"}`, false},
	} {
		_, err := jobqueue.Parse(tt.body)
		if (err == nil) != tt.ok {
			t.Errorf("Parse(%s) = %v, want ok %v", tt.body, err, tt.ok)
		}
	}
}

// TestExpireAt: the delay of a sandbox's expiry is until its end, in whole
// seconds rounded up (never early), at most a queue's delay, never less
// than none.
func TestExpireAt(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in, want time.Duration
	}{
		{1500 * time.Millisecond, 2 * time.Second},
		{2 * time.Second, 2 * time.Second},
		{-time.Minute, 0},
		{time.Hour, jobqueue.MaxDelay},
	} {
		m, d := jobqueue.ExpireAt("s1", 0, now.Add(c.in), now)
		if d != c.want || m.Type != jobqueue.SessionExpire || m.Generation != 1 || m.At != now.Add(c.in).UnixMilli() {
			t.Errorf("%s from now: %+v after %s, want after %s", c.in, m, d, c.want)
		}
	}
}
