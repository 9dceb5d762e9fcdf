package toolgate_test

// Fault suite (issue 19): the process running a sandbox's gateway tool call
// is SIGKILLed mid-call; see TestFaultToolCallKilledMidCallCompletesOnce.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// faultChildEnv hands TestToolCallChild its call (faultCall, JSON): set, the
// test binary is the process that serves it and dies at its crash point.
const faultChildEnv = "TOOLGATE_FAULT_CHILD"

// faultCall is the call the child serves, and where it stops.
type faultCall struct {
	Env, Session, Token string
	// At is the crash point: "effects" (before the tool's first side
	// effect) or "record" (after its side effects, before its record
	// completes).
	At string
	// Seconds is the call's deadline: its lease.
	Seconds int
}

// faultStopped is what the child prints at its crash point.
const faultStopped = "fault: stopped at "

// faultRuns stops before the run's completion is written.
type faultRuns struct {
	toolgate.Runs
	stop func()
}

func (r faultRuns) Complete(ctx context.Context, c toolgate.RunCompletion) (toolgate.RunCompletion, error) {
	r.stop()
	return r.Runs.Complete(ctx, c)
}

// faultRecords stops before the call's record completes.
type faultRecords struct {
	toolgate.Store
	stop func()
}

func (r faultRecords) Complete(ctx context.Context, key string, attempt int, res toolgate.Result, at time.Time, expires int64) error {
	r.stop()
	return r.Store.Complete(ctx, key, attempt, res, at, expires)
}

// faultEffects is the contract tools' executor over env's tables, as the
// toolcallback function builds it.
func faultEffects(set resources.Set, ddb *dynamodb.Client) (*toolgate.Effects, *dynamo.Sessions) {
	sessions := dynamo.NewSessions(ddb, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	return &toolgate.Effects{Sessions: sessions, Runs: dynamo.NewRuns(ddb, set.Jobs.Name)}, sessions
}

// TestToolCallChild is not a test: it is the child process of
// TestFaultToolCallKilledMidCallCompletesOnce, which runs it with
// faultChildEnv set. It serves one automation.complete with the real tables
// and hangs at its crash point until killed.
func TestToolCallChild(t *testing.T) {
	spec := os.Getenv(faultChildEnv)
	if spec == "" {
		return // only the child process of TestFaultToolCallKilledMidCallCompletesOnce serves
	}
	var in faultCall
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		t.Fatal(err)
	}
	set, err := resources.For(in.Env)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ddb := awsconfig.NewDynamoDB(cfg)
	stop := func(at string) func() {
		return func() {
			if at == in.At {
				fmt.Println(faultStopped + at)
				select {} // until killed
			}
		}
	}
	effects, sessions := faultEffects(set, ddb)
	effects.Runs = faultRuns{Runs: effects.Runs, stop: stop("effects")}
	svc := toolgate.New(toolgate.Options{
		Sessions: sessions,
		Records:  faultRecords{Store: dynamo.NewToolCalls(ddb, set.Idempotency.Name), stop: stop("record")},
		Executor: effects,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(in.Seconds)*time.Second)
	defer cancel()
	_, err = svc.Call(ctx, toolgate.Request{SessionID: in.Session, Tool: toolspec.AutomationComplete, Token: in.Token, ToolCallID: "call-1", Args: json.RawMessage(complete)})
	t.Fatalf("the call returned (%v) instead of stopping at %s", err, in.At)
}

// TestFaultToolCallKilledMidCallCompletesOnce: the process serving a
// sandbox's automation.complete (the toolcallback function, here a child
// process on the real tables) is SIGKILLed mid-call, before the tool's side
// effects or after them but before its record completes; the sandbox retries
// with the same tool_call_id.
func TestFaultToolCallKilledMidCallCompletesOnce(t *testing.T) {
	t.Log(`nothing lost, nothing doubled: the killed call's lease runs out (the clock is moved past it, not waited for), ` +
		`then the retry runs the tool and completes the call once (attempt 2, completed), and a further retry replays its result; ` +
		`the tool's side effects happened exactly once whichever side of them the kill fell: one completion of the run, ` +
		`one automation.completed event in the session`)
	t.Parallel()
	for _, at := range []string{"effects", "record"} {
		t.Run("killed at "+at, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			tenant := "fault"
			plain, hash := token.New(token.Sandbox)
			now := time.Now().UTC()
			sess := session.Session{ID: newUUID(t), Tenant: tenant, State: session.Ready, Generation: 1, Blueprint: session.Blueprint{
				SessionType:     "coding",
				TmuxSessionName: "ra-x",
			},

				SandboxTokenHash: hash, CreatedAt: now, UpdatedAt: now}
			if err := h.sessions.Create(t.Context(), sess, nil); err != nil {
				t.Fatal(err)
			}
			// The killed call's lease is long, so that its record is read
			// well inside it on a loaded machine.
			const leaseSeconds = 60
			spec, _ := json.Marshal(faultCall{Env: h.set.Env, Session: sess.ID, Token: plain, At: at, Seconds: leaseSeconds})
			child := exec.Command(os.Args[0], "-test.run=^TestToolCallChild$", "-test.count=1")
			child.Env = append(os.Environ(), faultChildEnv+"="+string(spec))
			child.Stderr = os.Stderr
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			for lines.Scan() && !strings.HasPrefix(lines.Text(), faultStopped) {
			}
			if lines.Text() != faultStopped+at {
				_ = child.Process.Kill()
				t.Fatalf("the child did not stop at %s: %q %v", at, lines.Text(), lines.Err())
			}
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()

			key := toolgate.RecordKey(sess.ID, toolspec.AutomationComplete, "c-1")
			killed, err := h.records.Get(t.Context(), key)
			if err != nil || killed.State != toolgate.InProgress || killed.Attempt != 1 {
				t.Fatalf("the killed call's record %+v %v", killed, err)
			}
			// The sandbox retries after the killed call's lease ran out.
			var offset atomic.Int64
			offset.Store(int64(time.Until(time.UnixMilli(killed.LeaseUntil)) + time.Millisecond))
			effects, _ := faultEffects(h.set, awsconfig.NewDynamoDB(awstest.Config(t)))
			svc := h.service(toolgate.Options{Executor: effects, Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
			req := toolgate.Request{SessionID: sess.ID, Tool: toolspec.AutomationComplete, Token: plain, ToolCallID: "call-1", Args: json.RawMessage(complete)}
			retry, err := svc.Call(t.Context(), req)
			if err != nil || retry.Pending != nil || retry.Replayed || retry.Result == nil || !retry.Result.Success {
				t.Fatalf("the retry: %+v %v", retry, err)
			}
			again, err := svc.Call(t.Context(), req)
			if err != nil || !again.Replayed || again.Result == nil || again.Result.Result != retry.Result.Result {
				t.Errorf("a further retry: %+v %v", again, err)
			}
			rec, err := h.records.Get(t.Context(), key)
			if err != nil || rec.State != toolgate.Completed || rec.Attempt != 2 {
				t.Errorf("record %+v %v, want completed by attempt 2", rec, err)
			}

			// The side effects: one run completion, one event.
			item, err := awsconfig.NewDynamoDB(awstest.Config(t)).GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(h.set.Jobs.Name), ConsistentRead: aws.Bool(true),
				Key: map[string]ddbtypes.AttributeValue{"job_id": &ddbtypes.AttributeValueMemberS{Value: "run#" + tenant + "#" + sess.ID + "#run-1"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "completion"}}})
			if err != nil || item.Item == nil {
				t.Fatalf("the run's completion: %+v %v", item, err)
			}
			if c, _ := item.Item["completion_id"].(*ddbtypes.AttributeValueMemberS); c == nil || c.Value != "c-1" {
				t.Errorf("the run's completion %v", item.Item)
			}
			evs, err := h.sessions.Events(t.Context(), sess.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			completed := 0
			for _, e := range evs {
				if e.Type == "automation.completed" {
					completed++
				}
			}
			if completed != 1 {
				t.Errorf("%d automation.completed events, want 1 (events %+v)", completed, evs)
			}
		})
	}
}
