// Package remote is the agent's remote mode (`agent sandbox`): inside a sandbox it
// fetches its spec from the gateway, primes the conversation (platform guardrails
// first, then the persona's skill and experience, then the initial prompt as the
// first user turn), reports ready with the guardrails hash it used, heartbeats, and
// stops gracefully when its inbox says so.
package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/callback"
	"github.com/remote-agents/remote-agents/sandbox/contract"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/sandbox/safefile"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Config is the sandbox's identity, pacing and model.
type Config struct {
	SessionID string
	// PoolSandbox is the pool sandbox id of a sandbox launched into the warm
	// pool, with no session (SessionID) yet: Run first waits for one to
	// claim it, and BootstrapCode is its launch code (see
	// sandboxwire.EnvPoolSandbox).
	PoolSandbox string
	Gateway     string
	// Token is the sandbox token; without one, Run gets it for BootstrapCode
	// before anything else (POST bootstrap), and forgets the code.
	Token         string
	BootstrapCode string
	Workspace     string
	Heartbeat     time.Duration
	// Poll is how often the inbox is read while the push connection is
	// down (or there is none); PushedPoll (default 10 s) how often while it
	// is up, every write to the inbox being pushed, should a push be lost.
	Poll       time.Duration
	PushedPoll time.Duration
	// PushURL is the push channel (see sandboxwire.EnvPushURL); "" none:
	// the inbox is polled only.
	PushURL string
	// EnvFile is where env values the user submits are written.
	EnvFile string
	// LLM, TokenLimit and ContextWindow are the brain's (see Brain).
	LLM           agentconfig.LLM
	TokenLimit    int
	ContextWindow int
	// Tools is the environment of the commands the agent runs (never its
	// own); ToolUser, if set, who they run as. Nil Tools passes the agent's
	// own environment (tests).
	Tools    *toolenv.Env
	ToolUser *toolenv.User
	// Secrets are the secret values the sandbox knows, hidden from tool
	// output, events and logs; Run adds its token and the user's env values.
	Secrets *redact.Secrets
	// Tmux names the tmux session the agent runs in ("" outside tmux), where
	// the configuration's services get a window each.
	Tmux string
	// ModelGateway is the platform's base URL for model calls (the gateway's
	// unless RA_MODEL_GATEWAY_URL moves it).
	ModelGateway string
	// Job is job mode's (spec.job): where the job directory goes, and limits.
	Job JobConfig
}

// NewConfig takes the sandbox's settings from the agent's environment, which
// must name the sandbox's session, gateway and token or bootstrap code, or,
// for a sandbox of the warm pool, its pool sandbox, gateway and launch code
// (agentconfig.Env.CheckSandbox).
// environ is that environment's entries, of which the commands the agent runs
// get the host variables only; secrets are the values to hide. A sandbox calls
// the hosted model providers through the platform's model gateway
// (ViaGateway): their SDK's base URL is the session's model route and their
// key its sandbox token, so no provider key is needed, or used, in a sandbox.
func NewConfig(env agentconfig.Env, environ []string, secrets *redact.Secrets) (Config, error) {
	if err := env.CheckSandbox(); err != nil {
		return Config{}, fmt.Errorf("sandbox: %w", err)
	}
	workspace, err := filepath.Abs(env.Workspace)
	if err != nil {
		return Config{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	var user *toolenv.User
	if env.ToolUser != "" {
		if user, err = toolenv.LookupUser(env.ToolUser, workspace); err != nil {
			return Config{}, fmt.Errorf("sandbox: RA_TOOL_USER: %w", err)
		}
	}
	secrets.Add(env.SandboxToken, env.BootstrapCode, env.LLM.APIKey)
	return Config{
		Tools:         toolenv.New(environ, workspace, user),
		ToolUser:      user,
		Secrets:       secrets,
		SessionID:     env.SessionID,
		PoolSandbox:   env.PoolSandbox,
		Gateway:       env.GatewayURL,
		Token:         env.SandboxToken,
		BootstrapCode: env.BootstrapCode,
		Workspace:     env.Workspace,
		Heartbeat:     env.Heartbeat,
		Poll:          env.InboxPoll,
		PushURL:       env.PushURL,
		EnvFile:       env.EnvFile,
		LLM:           ViaGateway(env),
		TokenLimit:    env.TokenLimit,
		ContextWindow: env.ContextWindow,
		Tmux:          tmuxSession(env.Tmux),
		ModelGateway:  cmp.Or(env.ModelGatewayURL, env.GatewayURL),
		Job:           JobConfig{Root: cmp.Or(env.JobRoot, env.Workspace), NetworkIsolated: env.JobNetworkIsolated},
	}, nil
}

// tmuxSession is the tmux session the agent runs in, if it does.
func tmuxSession(t agentconfig.Tmux) string {
	if !t.Inside {
		return ""
	}
	return t.SessionName
}

// ViaGateway is the model env configures, as a sandbox calls it: a hosted
// provider (sandboxwire.ViaGateway) through the platform's model route, with
// the sandbox token as its key, whatever key or base URL the environment
// holds (a sandbox started with a bootstrap code has no token yet: Run sets
// it once exchanged; a pool sandbox has no session yet either: Run sets both
// once claimed); a local server or the scripted provider as configured.
func ViaGateway(env agentconfig.Env) agentconfig.LLM {
	l := env.LLM
	if sandboxwire.ViaGateway(l.Provider) {
		l.BaseURL = sandboxwire.ModelBaseURL(cmp.Or(env.ModelGatewayURL, env.GatewayURL), env.SessionID, l.Provider)
		l.APIKey, l.APIKeyEnv = env.SandboxToken, ""
	}
	return l
}

// Message is one turn of the conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Prime builds the conversation a spec starts with: the priming message
// (guardrails first, then the mode's system prompt, then persona skill and
// experience), then the initial prompt as the first user turn. It refuses a spec
// without guardrails (fail closed).
func Prime(spec sandboxwire.Spec) ([]Message, error) {
	if strings.TrimSpace(spec.Guardrails.Content) == "" {
		return nil, errors.New("spec has no guardrails: refusing to prime")
	}
	var b strings.Builder
	b.WriteString(spec.Guardrails.Content)
	if p := strings.TrimSpace(spec.SystemPrompt); p != "" {
		b.WriteString("\n\n# Your task mode\n\n" + p)
	}
	if s := strings.TrimSpace(spec.Persona.Skill); s != "" {
		b.WriteString("\n\n# Persona skill\n\n" + s)
	}
	if e := strings.TrimSpace(spec.Persona.Experience); e != "" {
		b.WriteString("\n\n# Persona experience\n\n" + e)
	}
	return []Message{
		{Role: "system", Content: b.String()},
		{Role: "user", Content: spec.InitialPrompt},
	}, nil
}

// ConversationFile is where the primed conversation is written in the workspace.
const ConversationFile = "conversation.json"

// Run is the sandbox's life: get its token for its bootstrap code, prime,
// report ready, then heartbeat and poll until told to stop or ctx ends
// (SIGTERM). It reports ended before returning. A pool sandbox (PoolSandbox)
// first waits in the warm pool for a session to claim it, then lives that
// session's life the same way; one that is stopped before it is claimed
// returns nil, having reported nothing to any session.
func Run(ctx context.Context, c Config, log *slog.Logger) error {
	var prepared *provision.Prepared
	if c.PoolSandbox != "" {
		claim, err := waitInPool(ctx, c, log)
		if err != nil || claim == nil {
			return err
		}
		c, prepared = claimed(c, *claim), claim.prepared
		log.Info("pool sandbox claimed", slog.String("session_id", c.SessionID), slog.String("pool_sandbox", c.PoolSandbox))
	}
	cl := newClient(c)
	if c.Token == "" {
		tok, err := cl.bootstrap(ctx)
		if err != nil {
			return err
		}
		c.Token, c.BootstrapCode = tok, ""
		if sandboxwire.ViaGateway(c.LLM.Provider) {
			c.LLM.APIKey = tok // the model route's key (ViaGateway)
		}
		cl.c = c
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
	if cur, err := readEnv(c.EnvFile); err == nil && len(cur) > 0 {
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
		return r.runJob(ctx, spec, primed[0].Content)
	}
	workspace, err := r.provision(ctx, spec, primed)
	if err != nil {
		return err
	}
	// Ready means usable: without a model the agent could never answer.
	brain, err := r.brain(spec)
	if err != nil {
		r.log.Error("no usable model: the sandbox does not start", slog.String("error", err.Error()))
		_ = r.cl.status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonModelUnavailable)
		return err
	}
	if err := r.cl.ready(ctx, spec.Guardrails.Hash, workspace); err != nil {
		return err
	}
	// Apps' workspace tool requests run through the model's tools.
	r.tools = newWorkspaceTools(brain.Tools, r.cl, r.log)
	r.log.Info("sandbox ready", slog.String("session_id", r.c.SessionID), slog.String("guardrails_hash", spec.Guardrails.Hash),
		slog.String("provider", brain.Provider.Name()))
	// The first turn answers the initial prompt while heartbeats go on.
	turnCtx, cancelTurn := context.WithCancel(ctx)
	defer cancelTurn()
	r.converse(turnCtx, brain, primed)
	return r.serve(ctx, turnCtx)
}

// run is one sandbox's life: its gateway client, its conversation and the user
// messages that wait for the next turn.
type run struct {
	c     Config
	log   *slog.Logger
	cl    *client
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
		Emit: r.cl.Emit, Secrets: r.c.Secrets, Log: r.log, Values: spec.Env, Services: r.services, Tmux: r.c.Tmux, Prepared: r.prepared})
	primed[1].Content += workspaceNote(r.c.Workspace, spec.Workspace, status)
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
	if err := r.cl.do(ctx, http.MethodGet, sandboxwire.RouteSpec, nil, &spec); err != nil {
		return spec, nil, err
	}
	primed, err := Prime(spec)
	if err != nil {
		_ = r.cl.status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonError)
		return spec, nil, err
	}
	// Values persisted for the configuration are in the env file before the
	// agent starts; the model is told their keys, never their values.
	if len(spec.Env) > 0 {
		if err := r.mergeEnv(spec.Env); err != nil {
			_ = r.cl.status(context.WithoutCancel(ctx), sandboxwire.Failed, "", sandboxwire.ReasonError)
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
	if ws == nil || (ws.RepositoryURL == "" && ws.Task == nil && st.Status != sandboxwire.WorkspaceDegraded) {
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
	if st.Status == sandboxwire.WorkspaceDegraded {
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

// converse starts the conversation's first turn, on the initial prompt.
func (r *run) converse(ctx context.Context, brain *Brain, primed []Message) {
	r.conv = &conversation{brain: brain, cl: r.cl, system: primed[0].Content, msgs: []llm.Message{{Role: llm.User, Content: primed[1].Content}}, log: r.log}
	r.turning = true
	go func() { r.turnDone <- r.conv.turn(ctx) }()
}

// startTurn answers the pending user messages, one turn for all of them.
func (r *run) startTurn(ctx context.Context) {
	if r.conv == nil || r.turning || len(r.pending) == 0 {
		return
	}
	r.conv.msgs = append(r.conv.msgs, llm.Message{Role: llm.User, Content: strings.Join(r.pending, "\n\n")})
	r.pending, r.turning = nil, true
	go func() { r.turnDone <- r.conv.turn(ctx) }()
}

// serve heartbeats and reads the inbox until told to stop, ctx ends (SIGTERM)
// or the token budget is spent, and reports how it ended.
func (r *run) serve(ctx, turnCtx context.Context) error {
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
		go r.cl.listen(pushCtx, r.c.PushURL, wake, &pushUp, r.log)
	}
	lastRead := time.Now()
	for {
		var orders sandboxwire.Orders
		var err error
		select {
		case <-ctx.Done():
			r.log.Info("sandbox stopping: signal")
			return r.cl.status(context.WithoutCancel(ctx), sandboxwire.Ended, "", sandboxwire.ReasonShutdown)
		case <-beat.C:
			// A turn in progress (a model call, a tool running) is activity.
			err = r.cl.do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, sandboxwire.HeartbeatReport{Busy: r.turning}, &orders)
		case <-poll.C:
			if pushUp.Load() && time.Since(lastRead) < cmp.Or(r.c.PushedPoll, defaultPushedPoll) {
				continue
			}
			orders, err = r.readInbox(ctx, turnCtx, "poll")
			lastRead = time.Now()
		case <-wake:
			orders, err = r.readInbox(ctx, turnCtx, "push")
			lastRead = time.Now()
		case terr := <-r.turnDone:
			r.turning = false
			switch {
			case errors.Is(terr, errTokenLimit):
				r.log.Info("sandbox stopping: token limit")
				return r.cl.status(context.WithoutCancel(ctx), sandboxwire.Ended, "", sandboxwire.ReasonTokenLimit)
			case terr != nil && ctx.Err() == nil:
				r.log.Warn("conversation turn failed", slog.String("error", terr.Error()))
			}
			r.startTurn(turnCtx)
			continue
		}
		var unauthorized *authError
		switch {
		case errors.As(err, &unauthorized):
			return err // replaced or ended: this sandbox may no longer act
		case err != nil:
			r.log.Warn("gateway call failed", slog.String("error", err.Error()))
		case orders.Stop:
			r.log.Info("sandbox stopping: inbox")
			if orders.State.Terminal() {
				return nil
			}
			return r.cl.status(ctx, sandboxwire.Ended, "", sandboxwire.ReasonShutdown)
		}
	}
}

// readInbox reads the inbox after the cursor and queues what it brought; cause
// (poll, push) is logged with what it brought.
func (r *run) readInbox(ctx, turnCtx context.Context, cause string) (sandboxwire.Orders, error) {
	var orders sandboxwire.Orders
	err := r.cl.do(ctx, http.MethodGet, sandboxwire.RouteInbox+"?"+sandboxwire.InboxAfter+"="+strconv.FormatInt(r.after, 10), nil, &orders)
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

// mergeEnv merges values into the env file, gives it to the tools' user, and
// puts the file's values into the tools' environment and into what is hidden
// from their output: the user's values are for the workspace's programs, not
// for the events apps and viewers read.
func (r *run) mergeEnv(values map[string]string) error {
	merged, err := mergeEnv(r.c.EnvFile, values)
	if err != nil {
		return err
	}
	if err := r.c.ToolUser.Own(r.c.EnvFile); err != nil {
		return err
	}
	if r.c.Tools != nil {
		r.c.Tools.SetValues(merged)
	}
	r.c.Secrets.Add(slices.Collect(maps.Values(merged))...)
	return nil
}

// MergeEnv merges values into the JSON env file at path (created 0600), written
// atomically (safefile): the agent reads single keys from it. Keys it holds
// that values does not name are kept. Anything but a regular file at path (a
// link planted in a shared /tmp) is refused and left alone.
func MergeEnv(path string, values map[string]string) error {
	_, err := mergeEnv(path, values)
	return err
}

// mergeEnv is MergeEnv, returning the merged values.
func mergeEnv(path string, values map[string]string) (map[string]string, error) {
	cur, err := readEnv(path)
	if err != nil {
		return nil, err
	}
	maps.Copy(cur, values)
	out, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode env file: %w", err)
	}
	return cur, safefile.Write(path, out, 0o600)
}

// readEnv reads the env file at path (none: empty), without following a link,
// and makes it 0600 whatever it was: it holds secrets, and the rewrite keeps
// its mode.
func readEnv(path string) (map[string]string, error) {
	cur := map[string]string{}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cur, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("env file %s is not a regular file", path)
	case err != nil:
		return nil, fmt.Errorf("env file: %w", err)
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("env file %s is not a regular file", path)
	}
	if err := json.NewDecoder(f).Decode(&cur); err != nil {
		return nil, fmt.Errorf("env file %s is damaged: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return nil, fmt.Errorf("env file: %w", err)
	}
	if cur == nil { // the file held null
		cur = map[string]string{}
	}
	return cur, nil
}

type client struct {
	c     Config
	http  *http.Client
	retry retry.Policy
}

// newClient is the gateway client of a sandbox of c.
func newClient(c Config) *client {
	return &client{c: c, http: &http.Client{Timeout: 30 * time.Second}, retry: gatewayRetry}
}

// gatewayRetry is how the sandbox retries a channel call that failed in
// passing: a few times within seconds, since the heartbeat and inbox loop waits
// meanwhile and its next tick tries again anyway.
var gatewayRetry = retry.Policy{Retries: 4, Initial: 250 * time.Millisecond, Max: 4 * time.Second}

type authError struct{ status int }

func (e *authError) Error() string {
	return fmt.Sprintf("gateway refused the sandbox token (%d)", e.status)
}

// bootstrap exchanges the client's bootstrap code for the sandbox token. The
// code works once: a refused code (spent, expired, replaced by a later launch)
// is an *authError, never retried; a transport failure or 5xx is retried with
// the same code (an exchange whose answer was lost has spent it, and the
// retry is refused: the sandbox then stops, and its session fails).
func (cl *client) bootstrap(ctx context.Context) (string, error) {
	if cl.c.BootstrapCode == "" {
		return "", errors.New("sandbox: neither a sandbox token nor a bootstrap code")
	}
	withCode := *cl
	withCode.c.Token = cl.c.BootstrapCode
	var out sandboxwire.BootstrapResponse
	if err := withCode.do(ctx, http.MethodPost, sandboxwire.RouteBootstrap, struct{}{}, &out); err != nil {
		return "", fmt.Errorf("exchange the bootstrap code: %w", err)
	}
	if out.SandboxToken == "" {
		return "", errors.New("exchange the bootstrap code: the gateway sent no token")
	}
	return out.SandboxToken, nil
}

// Emit appends one event to the session.
func (cl *client) Emit(ctx context.Context, p sandboxwire.Payload) error {
	ev, err := sandboxwire.NewEvent(p)
	if err != nil {
		return err
	}
	ev.Data = cl.c.Secrets.JSON(ev.Data)
	// The id makes a retried append (its answer lost) append nothing twice.
	var out sandboxwire.EventsResponse
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteEvents, sandboxwire.EventsRequest{ID: uuid.NewString(), Events: []sandboxwire.Event{ev}}, &out)
}

// Uploads asks for presigned upload URLs for a gateway tool call's files.
func (cl *client) Uploads(ctx context.Context, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	var out sandboxwire.UploadsResponse
	err := cl.do(ctx, http.MethodPost, sandboxwire.RouteUploads, in, &out)
	return out, err
}

// ready reports ready, with the guardrails hash primed with and how the
// workspace was provisioned.
func (cl *client) ready(ctx context.Context, hash string, ws *sandboxwire.WorkspaceStatus) error {
	var orders sandboxwire.Orders
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: sandboxwire.Ready, GuardrailsHash: hash, Workspace: ws}, &orders)
}

func (cl *client) status(ctx context.Context, state sandboxwire.State, hash string, reason sandboxwire.Reason) error {
	var orders sandboxwire.Orders
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: state, GuardrailsHash: hash, Reason: reason}, &orders)
}

// do calls route, retrying transport failures, 429 and 5xx (retry.Do) within
// ctx. A refused token (401, 403) is an *authError and is never retried. Calls
// are not idempotent on the wire: an event whose answer was lost may be
// appended twice.
func (cl *client) do(ctx context.Context, method, route string, in, out any) error {
	return cl.doPath(ctx, method, sandboxwire.Prefix+url.PathEscape(cl.c.SessionID)+"/"+route, route, in, out)
}

// doPath is do for the route at path (below the gateway), named name in
// errors: the session's routes and the warm pool's (PoolPrefix).
func (cl *client) doPath(ctx context.Context, method, path, name string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		body = b
	}
	_, err := retry.Do(ctx, cl.retry, func() (struct{}, error) {
		return struct{}{}, cl.once(ctx, method, path, name, body, out)
	})
	return err
}

// statusError is an answer other than 200 (and the 401 and 403 of
// authError).
type statusError struct {
	route  string
	status int
	body   []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: gateway answered %d: %s", e.route, e.status, e.body)
}

// once makes one attempt of a call, its error marked for retry.Do.
func (cl *client) once(ctx context.Context, method, path, route string, body []byte, out any) error {
	u := cl.c.Gateway + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return retry.Permanent(fmt.Errorf("%s: %w", route, err))
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := cl.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(res.Body, sandboxwire.MaxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		return retry.Permanent(&authError{status: res.StatusCode})
	}
	if res.StatusCode != http.StatusOK {
		return retry.Status(&statusError{route: route, status: res.StatusCode, body: raw}, res.StatusCode, res.Header)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return retry.Permanent(fmt.Errorf("%s: decode: %w", route, err))
	}
	return nil
}
