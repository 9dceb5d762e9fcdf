// Package remote is the agent's remote mode (`agent sandbox`), its run loop:
// inside a sandbox it fetches its spec from the gateway, primes the
// conversation (platform guardrails first, then the persona's skill and
// experience, then the initial prompt as the first user turn), reports ready
// with the guardrails hash it used, heartbeats, and stops gracefully when its
// inbox says so. Its other roles are packages of their own, which Run wires:
// gateway (the platform client), poolwait (a warm-pool sandbox's wait for a
// session), jobmode (an orchestrator job instead of a conversation), push
// (the push connection) and envfile (the env file).
package remote

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/callback"
	"github.com/remote-agents/remote-agents/sandbox/checkpoint"
	"github.com/remote-agents/remote-agents/sandbox/contract"
	"github.com/remote-agents/remote-agents/sandbox/envfile"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/jobmode"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/poolwait"
	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Run is the sandbox's life: get its token for its bootstrap code, prime,
// report ready, then heartbeat and poll until told to stop or ctx ends
// (SIGTERM). It reports ended before returning. A pool sandbox (PoolSandbox)
// first waits in the warm pool for a session to claim it, then lives that
// session's life the same way; one that is stopped before it is claimed
// returns nil, having reported nothing to any session.
func Run(ctx context.Context, c Config, log *slog.Logger) error {
	cl := gateway.New(c.Gateway, c.SessionID, c.Token, c.Secrets)
	var prepared *provision.Prepared
	if c.PoolSandbox != "" {
		claim, err := poolwait.Wait(ctx, cl, poolwait.Config{PoolSandbox: c.PoolSandbox, LaunchCode: c.BootstrapCode, PushURL: c.PushURL,
			Heartbeat: c.Heartbeat, Poll: c.Poll, Workspace: c.Workspace, Tools: c.Tools, ToolUser: c.ToolUser, Secrets: c.Secrets, Tmux: c.Tmux}, log)
		if err != nil || claim == nil {
			return err
		}
		c, prepared = claimed(c, *claim), claim.Prepared
		cl = gateway.New(c.Gateway, c.SessionID, c.Token, c.Secrets)
		log.Info("pool sandbox claimed", slog.String("session_id", c.SessionID), slog.String("pool_sandbox", c.PoolSandbox))
	}
	if c.Token == "" {
		tok, err := cl.Bootstrap(ctx, c.BootstrapCode)
		if err != nil {
			return err
		}
		c.Token, c.BootstrapCode = tok, ""
		if sandboxwire.ViaGateway(c.LLM.Provider) {
			c.LLM.APIKey = tok // the model route's key (ViaGateway)
		}
		cl = cl.WithToken(tok)
	}
	c.Secrets.Add(c.Token)
	// The workspace is the tools' user's, to work in.
	if err := c.ToolUser.OwnTree(c.Workspace); err != nil {
		return err
	}
	r := &run{c: c, log: log, asked: &questions{}, turnDone: make(chan error, 1), cl: cl, services: &provision.Services{}, prepared: prepared}
	// The configuration's services end with the sandbox.
	defer r.services.Stop()
	// Values an earlier run of this sandbox wrote are the commands' already.
	if cur, err := envfile.Read(c.EnvFile); err == nil && len(cur) > 0 {
		if c.Tools != nil {
			c.Tools.SetValues(cur)
		}
		c.Secrets.Add(slices.Collect(maps.Values(cur))...)
	}
	spec, primed, err := r.primeSpec(ctx)
	if err != nil {
		return err
	}
	if spec.Job != nil {
		return jobmode.New(jobmode.Sandbox{Client: cl, Log: log, SessionID: c.SessionID, Token: c.Token, ModelGateway: cmp.Or(c.ModelGateway, c.Gateway),
			LLM: c.LLM, Workspace: c.Workspace, Tools: c.Tools, ToolUser: c.ToolUser, Secrets: c.Secrets, Heartbeat: c.Heartbeat}, c.Job).Run(ctx, spec, primed[0].Content)
	}
	r.every = time.Duration(spec.CheckpointSeconds) * time.Second
	var workspace *sandboxwire.WorkspaceStatus
	var resumed *agentState
	if spec.Resume != nil {
		// The checkpoint is the workspace: nothing is provisioned. A
		// restore that fails reports nothing: the sandbox's stop leaves the
		// session paused on its checkpoint.
		st, err := r.resume(ctx, *spec.Resume)
		if err != nil {
			return err
		}
		resumed = &st
	} else if workspace, err = r.provision(ctx, spec, primed); err != nil {
		return err
	}
	// Ready means usable: without a model the agent could never answer.
	brain, err := r.brain(spec)
	if err != nil {
		r.log.Error("no usable model: the sandbox does not start", slog.String("error", err.Error()))
		_ = r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonModelUnavailable)
		return err
	}
	// The E2B sandbox API is up before the sandbox says it is ready.
	if err := r.serveEnvd(ctx, spec); err != nil {
		r.log.Error("envd could not start: the sandbox does not start", slog.String("error", err.Error()))
		_ = r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonError)
		return err
	}
	if err := r.cl.Ready(ctx, spec.Guardrails.Hash, workspace); err != nil {
		return err
	}
	// Apps' workspace tool requests run through the model's tools.
	r.tools = newWorkspaceTools(brain.Tools, r.cl, r.c.Secrets, r.log)
	r.log.Info("sandbox ready", slog.String("session_id", r.c.SessionID), slog.String("guardrails_hash", spec.Guardrails.Hash),
		slog.String("provider", brain.Provider.Name()))
	// The first turn answers the initial prompt while heartbeats go on; a
	// resumed conversation goes on with what waited for it.
	turnCtx, cancelTurn := context.WithCancel(ctx)
	defer cancelTurn()
	if resumed != nil {
		r.conv = &conversation{brain: brain, cl: r.cl, secrets: r.c.Secrets, system: resumed.System, msgs: resumed.Messages, used: resumed.Used, log: r.log, watched: &r.watched}
		r.after, r.pending = resumed.After, resumed.Pending
		r.startTurn(turnCtx)
	} else {
		r.converse(turnCtx, brain, primed, spec.InitialPrompt)
	}
	return r.serve(ctx, turnCtx, cancelTurn)
}

// run is one sandbox's life: its gateway client, its conversation and the user
// messages that wait for the next turn.
type run struct {
	c     Config
	log   *slog.Logger
	cl    *gateway.Client
	asked *questions
	// conv is nil when no model could be built: the agent cannot answer.
	conv     *conversation
	turning  bool
	pending  []string // user messages that arrived during a turn
	turnDone chan error
	after    int64 // the inbox cursor
	// tools runs the workspace tool requests apps make (set once ready).
	tools *workspaceTools
	// services are the configuration's service commands provisioning started.
	services *provision.Services
	// prepared is what a pool sandbox provisioned before its claim.
	prepared *provision.Prepared
	// ckpt writes its checkpoints (pause.go); every is how often between
	// turns (0: only when paused), changed whether anything happened
	// since the last.
	ckpt    *checkpoint.Writer
	every   time.Duration
	changed bool
	// turnBase, turnUsed and turnInput are the conversation, the usage and
	// the input of the turn in progress as it started (startTurn).
	turnBase  []llm.Message
	turnUsed  llm.Usage
	turnInput string
	// stopped: the user stopped the turn in progress, which is returning.
	stopped bool
	// watched: a viewer watches the agent (the platform says so over the
	// push channel, and in every heartbeat's and inbox read's answer); the
	// turn posts its live events only then.
	watched watchState
}

// provision provisions the workspace spec describes (package provision) and
// writes the primed conversation to the workspace. It returns how
// provisioning went, for ready.
func (r *run) provision(ctx context.Context, spec sandboxwire.Spec, primed []Message) (*sandboxwire.WorkspaceStatus, error) {
	var env []string
	if r.c.Tools != nil {
		env = r.c.Tools.Environ()
	}
	status := provision.Run(ctx, spec.Workspace, provision.Options{Dir: r.c.Workspace, Env: env, User: r.c.ToolUser,
		Emit: r.cl.EmitAll, Secrets: r.c.Secrets, Log: r.log, Values: spec.Env, Services: r.services, Tmux: r.c.Tmux, Prepared: r.prepared})
	primed[1].Content += workspaceNote(r.c.Workspace, spec.Workspace, status)
	if strings.TrimSpace(spec.InitialPrompt) == "" {
		return &status, nil // a sandbox of the sandbox API: its home is its client's alone
	}
	raw, err := json.MarshalIndent(primed, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode conversation: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.c.Workspace, ConversationFile), raw, 0o600); err != nil {
		return nil, fmt.Errorf("write conversation: %w", err)
	}
	return &status, nil
}

// primeSpec fetches the spec, primes with it and merges its env values into
// the env file.
func (r *run) primeSpec(ctx context.Context) (sandboxwire.Spec, []Message, error) {
	var spec sandboxwire.Spec
	if err := r.cl.Do(ctx, http.MethodGet, sandboxwire.RouteSpec, nil, &spec); err != nil {
		return spec, nil, err
	}
	primed, err := Prime(spec)
	if err != nil {
		_ = r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonError)
		return spec, nil, err
	}
	// Values persisted for the configuration are in the env file before the
	// agent starts; the model is told their keys, never their values.
	if len(spec.Env) > 0 {
		if err := r.mergeEnv(spec.Env); err != nil {
			_ = r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonError)
			return spec, nil, fmt.Errorf("write the configuration's env values: %w", err)
		}
		primed[1].Content += fmt.Sprintf("\n\n(Environment values saved for this configuration are in %s: %s.)",
			r.c.EnvFile, strings.Join(slices.Sorted(maps.Keys(spec.Env)), ", "))
	}
	return spec, primed, nil
}

// workspaceNote tells the agent, after its initial prompt, what its
// workspace holds: the repository and branch cloned, the task context (and
// where its file is), and what provisioning could not do.
func workspaceNote(dir string, ws *sandboxwire.WorkspaceSpec, st sandboxwire.WorkspaceStatus) string {
	if ws == nil || (ws.RepositoryURL == "" && ws.Task == nil && len(st.Warnings) == 0) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n(Your workspace is %s.", dir)
	if ws.RepositoryURL != "" {
		fmt.Fprintf(&b, " Repository: %s", sandboxwire.RedactURL(ws.RepositoryURL))
		if ws.Branch != "" {
			fmt.Fprintf(&b, ", branch %s", ws.Branch)
		}
		b.WriteString(".")
	}
	if t := ws.Task; t != nil {
		b.WriteString(" Task context:")
		if t.RepositoryURL != "" {
			fmt.Fprintf(&b, " repository %s;", sandboxwire.RedactURL(t.RepositoryURL))
		}
		if t.Branch != "" {
			fmt.Fprintf(&b, " branch %s;", t.Branch)
		}
		if t.PullRequestNumber != 0 {
			fmt.Fprintf(&b, " pull request #%d;", t.PullRequestNumber)
		}
		if t.BaseBranch != "" {
			fmt.Fprintf(&b, " base branch %s;", t.BaseBranch)
		}
		fmt.Fprintf(&b, " the same as JSON in %s.", sandboxwire.TaskFile)
	}
	if len(st.Warnings) > 0 {
		fmt.Fprintf(&b, " Provisioning was partial: %s.", strings.Join(st.Warnings, "; "))
	}
	b.WriteString(")")
	return b.String()
}

// brain builds the model and the tools (with the contract tools of the
// session's type). A sandbox uses only the provider RA_LLM_PROVIDER names:
// the scripted provider too must be asked for.
func (r *run) brain(spec sandboxwire.Spec) (*Brain, error) {
	if r.c.LLM.Provider == "" {
		return nil, errors.New("no model is configured: set RA_LLM_PROVIDER (scripted, anthropic, openai or bedrock)")
	}
	contractTools := func(reg *tools.Registry, p *policy.Policy) error {
		if err := reg.Register(r.asked.tool(r.cl.Emit)); err != nil {
			return err
		}
		return contract.Register(reg, p, contract.Options{
			Callback: &callback.Client{Gateway: r.c.Gateway, SessionID: r.c.SessionID, Token: r.c.Token},
			Channel:  r.cl,
			Setup:    spec.SessionType == sandboxwire.SessionSetup,
			EnvFile:  r.c.EnvFile,
			// A snapshot is of the workspace, not of this session's conversation
			// (guardrails and all) or of what its user attached.
			// Nor of the platform's own folder, written afresh for each session.
			Private: []string{ConversationFile, AttachmentsDir, filepath.Dir(sandboxwire.TaskFile)},
		})
	}
	return NewBrain(r.c, spec.Tools, contractTools)
}

// converse starts the conversation's first turn, on the initial prompt; a
// sandbox of the sandbox API has none, and its conversation starts with
// the first message sent to it.
func (r *run) converse(ctx context.Context, brain *Brain, primed []Message, prompt string) {
	r.conv = &conversation{brain: brain, cl: r.cl, secrets: r.c.Secrets, system: primed[0].Content, log: r.log, watched: &r.watched}
	if strings.TrimSpace(prompt) == "" {
		return
	}
	r.conv.msgs = []llm.Message{{Role: llm.User, Content: primed[1].Content}}
	r.turnBase, r.turnUsed, r.turnInput = nil, llm.Usage{}, primed[1].Content
	r.turning = true
	go func() { r.turnDone <- r.conv.turn(ctx) }()
}

// startTurn answers the pending user messages, one turn for all of them.
func (r *run) startTurn(ctx context.Context) {
	if r.conv == nil || r.turning || len(r.pending) == 0 {
		return
	}
	input := strings.Join(r.pending, "\n\n")
	// What a checkpoint written during the turn keeps: the conversation as
	// the turn found it (the turn only appends), its input waiting again.
	n := len(r.conv.msgs)
	r.turnBase, r.turnUsed, r.turnInput = r.conv.msgs[:n:n], r.conv.used, input
	r.conv.msgs = append(r.conv.msgs, llm.Message{Role: llm.User, Content: input})
	r.pending, r.turning = nil, true
	go func() { r.turnDone <- r.conv.turn(ctx) }()
}

// serve heartbeats and reads the inbox until told to stop, ctx ends (SIGTERM)
// or the token budget is spent, and reports how it ended.
func (r *run) serve(ctx, turnCtx context.Context, stopTurn context.CancelFunc) error {
	defer func() { stopTurn() }() // the last turn context's, whichever
	beat := time.NewTicker(r.c.Heartbeat)
	defer beat.Stop()
	poll := time.NewTicker(cmp.Or(r.c.Poll, time.Second))
	defer poll.Stop()
	wake := make(chan struct{}, 1)
	// While the push connection is up every write to the inbox is pushed:
	// the poll is the fallback for while it is down, and otherwise reads
	// only every PushedPoll, should a push have been lost.
	var pushUp atomic.Bool
	if r.c.PushURL != "" {
		pushCtx, stopPush := context.WithCancel(ctx)
		defer stopPush()
		go r.listen(pushCtx, r.c.PushURL, wake, &pushUp, r.log)
	}
	lastRead := time.Now()
	// What waited for this sandbox (a message that resumed it, one sent
	// while it started) is read at once, not at the first poll or push:
	// until its turn starts the agent is idle, and an idle limit may pause
	// it again with the message unread.
	start := make(chan struct{}, 1)
	start <- struct{}{}
	var periodic <-chan time.Time
	if r.every > 0 {
		tick := time.NewTicker(r.every)
		defer tick.Stop()
		periodic = tick.C
	}
	for {
		var orders sandboxwire.Orders
		var err error
		select {
		case <-periodic:
			r.periodicCheckpoint(ctx)
			continue
		case <-ctx.Done():
			r.log.Info("sandbox stopping: signal")
			// Its checkpoint first: one of a turn in progress keeps the
			// conversation as the turn found it, the turn to be done again.
			paused := r.interrupted(context.WithoutCancel(ctx))
			r.finishTurn(stopTurn)
			if paused {
				return nil // paused on a checkpoint: a resume goes on from it
			}
			return r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Ended, "", sandboxwire.ReasonShutdown)
		case <-beat.C:
			// A turn in progress (a model call, a tool running) is activity.
			err = r.cl.Do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, sandboxwire.HeartbeatReport{Busy: r.turning}, &orders)
		case <-poll.C:
			if pushUp.Load() && time.Since(lastRead) < cmp.Or(r.c.PushedPoll, defaultPushedPoll) {
				continue
			}
			orders, err = r.readInbox(ctx, turnCtx, "poll")
			lastRead = time.Now()
		case <-start:
			orders, err = r.readInbox(ctx, turnCtx, "start")
			lastRead = time.Now()
		case <-wake:
			orders, err = r.readInbox(ctx, turnCtx, "push")
			lastRead = time.Now()
		case terr := <-r.turnDone:
			r.turning, r.changed = false, true
			switch {
			case errors.Is(terr, errTokenLimit):
				r.log.Info("sandbox stopping: token limit")
				return r.cl.Status(context.WithoutCancel(ctx), sandboxwire.Ended, "", sandboxwire.ReasonTokenLimit)
			case r.stopped:
				r.stopped = false
				turnCtx, stopTurn = r.interrupt(ctx, terr)
			case terr != nil && ctx.Err() == nil:
				r.log.Warn("conversation turn failed", slog.String("error", terr.Error()))
			}
			r.startTurn(turnCtx) // what came with the interrupt, or waited
			continue
		}
		if err == nil {
			r.watched.set(orders.Viewers, orders.ViewerEpoch)
		}
		if err == nil && r.turning && interrupts(orders) {
			stopTurn() // the turn returns, cut short: see turnDone
			r.stopped = true
		}
		var unauthorized *gateway.AuthError
		switch {
		case errors.As(err, &unauthorized):
			return err // replaced or ended: this sandbox may no longer act
		case err != nil:
			r.log.Warn("gateway call failed", slog.String("error", err.Error()))
		case orders.State == sandboxwire.Pausing:
			done, tc, stop := r.pause(ctx, stopTurn)
			if done {
				return nil // paused: the session lives on without this sandbox
			}
			turnCtx, stopTurn = tc, stop
			r.startTurn(turnCtx)
		case orders.Stop:
			r.log.Info("sandbox stopping: inbox")
			r.finishTurn(stopTurn)
			if orders.State.Terminal() || orders.State == sandboxwire.Paused {
				return nil
			}
			return r.cl.Status(ctx, sandboxwire.Ended, "", sandboxwire.ReasonShutdown)
		}
	}
}

// interruptedNote ends, in the conversation, a turn the user stopped.
const interruptedNote = "(The user stopped this reply before it was finished.)"

// interrupts reports whether the inbox brought a user's word to stop the
// turn in progress.
func interrupts(orders sandboxwire.Orders) bool {
	return slices.ContainsFunc(orders.Messages, func(m sandboxwire.InboxMessage) bool { return m.Interrupt })
}

// interrupt closes a turn the user stopped (its model call or tool
// cancelled; terr is what it returned) and returns the context of the turns
// to come. Cut short, the conversation goes on from the turn's input,
// answered with a note that the user stopped it (what the turn did is in
// the events, not in the model's context, which could hold a tool call cut
// short), and the agent is idle; a turn that had ended by itself is left as
// it ended.
func (r *run) interrupt(ctx context.Context, terr error) (context.Context, context.CancelFunc) {
	if !errors.Is(terr, context.Canceled) {
		return context.WithCancel(ctx)
	}
	r.conv.msgs = append(r.turnBase[:len(r.turnBase):len(r.turnBase)],
		llm.Message{Role: llm.User, Content: r.turnInput}, llm.Message{Role: llm.Assistant, Content: interruptedNote})
	r.changed = true
	r.log.Info("turn interrupted by the user")
	if err := r.conv.state(ctx, sandboxwire.Idle); err != nil {
		r.log.Warn("report idle after an interrupt", slog.String("error", err.Error()))
	}
	return context.WithCancel(ctx)
}

// finishTurn stops a turn in progress and waits for it to return, so that
// nothing it reports (idle, a message) comes after the sandbox's end.
func (r *run) finishTurn(stop context.CancelFunc) {
	stop()
	if !r.turning {
		return
	}
	r.turning = false
	if err := <-r.turnDone; err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("conversation turn failed", slog.String("error", err.Error()))
	}
}

// readInbox reads the inbox after the cursor and queues what it brought; cause
// (start, poll, push) is logged with what it brought.
func (r *run) readInbox(ctx, turnCtx context.Context, cause string) (sandboxwire.Orders, error) {
	var orders sandboxwire.Orders
	err := r.cl.Do(ctx, http.MethodGet, sandboxwire.RouteInbox+"?"+sandboxwire.InboxAfter+"="+strconv.FormatInt(r.after, 10), nil, &orders)
	if err != nil {
		return orders, err
	}
	if len(orders.Messages) > 0 || len(orders.Env) > 0 || orders.Stop {
		r.log.Info("inbox read", slog.String("cause", cause), slog.Int("messages", len(orders.Messages)),
			slog.Int("env_values", len(orders.Env)), slog.Bool("stop", orders.Stop), slog.Int64("next", orders.Next))
	}
	r.take(ctx, orders)
	r.startTurn(turnCtx)
	return orders, nil
}

// take queues what the inbox brought for the next turn: user messages (their
// attachments saved in the workspace, answers in words) and env values (written
// to the env file, named to the model); workspace tool requests start at once.
func (r *run) take(ctx context.Context, orders sandboxwire.Orders) {
	r.after = max(r.after, orders.Next)
	if r.tools != nil {
		r.tools.take(ctx, orders.ToolRequests)
	}
	if len(orders.ToolRequests) > 0 || len(orders.Messages) > 0 || len(orders.Env) > 0 {
		r.changed = true // an app's tool may change the workspace; the inbox moved
	}
	for _, m := range orders.Messages {
		saved, err := download(ctx, r.c.Workspace, m, r.c.ToolUser)
		if err != nil {
			r.log.Warn("attachment", slog.String("error", err.Error()))
		}
		if text := r.asked.text(m, saved); text != "" {
			r.pending = append(r.pending, text)
		}
	}
	if len(orders.Env) == 0 {
		return
	}
	if err := r.mergeEnv(orders.Env); err != nil {
		r.log.Error("write env file", slog.String("error", err.Error()))
		return
	}
	r.pending = append(r.pending, fmt.Sprintf("The user submitted values for %s; they are in %s, and in the environment of your commands under their names.",
		strings.Join(slices.Sorted(maps.Keys(orders.Env)), ", "), r.c.EnvFile))
}
