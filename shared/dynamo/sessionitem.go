package dynamo

import (
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// sessionItem is a session as the sessions table holds it: the attribute
// names (its json tags, which the table's encoder reads), the index keys
// (list_key for by_tenant, watch_shard and due_at for by_due, live_tenant for
// by_live), the TTL (expires_at) and the encodings (times as RFC 3339 strings
// in UTC, instants the domain does not read as time.Time in epoch
// milliseconds). These names and encodings are what the items already in a
// table hold: changing one is a data migration. The event counter
// (event_seq) lives on the item too, moved only by ADDs (appends, and the
// transitions that record a lifecycle event).
type sessionItem struct {
	ID                   string                       `json:"session_id"`
	ProjectName          string                       `json:"project_name,omitempty"`
	PersonaSlug          string                       `json:"persona_slug"`
	InitialPrompt        string                       `json:"initial_prompt"`
	Features             session.Features             `json:"feature_flags"`
	AppKeyID             string                       `json:"app_key_id,omitempty"`
	Tenant               string                       `json:"tenant,omitempty"`
	SessionType          string                       `json:"session_type,omitempty"`
	ClientType           string                       `json:"client_type,omitempty"`
	ConfigurationID      string                       `json:"configuration_id,omitempty"`
	SystemPrompt         string                       `json:"system_prompt,omitempty"`
	AgentType            string                       `json:"agent_type,omitempty"`
	Workspace            *registry.WorkspaceConfig    `json:"workspace,omitempty"`
	AppLimits            *registry.SessionLimits      `json:"app_limits,omitempty"`
	AppCaps              *registry.SpendCaps          `json:"app_caps,omitempty"`
	AgentTypeOwner       string                       `json:"agent_type_owner,omitempty"`
	PoolSandbox          string                       `json:"pool_sandbox,omitempty"`
	TaskContext          *sandboxwire.TaskContext     `json:"task_context,omitempty"`
	EndUser              string                       `json:"end_user,omitempty"`
	WorkspaceStatus      *sandboxwire.WorkspaceStatus `json:"workspace_status,omitempty"`
	WorkspaceDropped     string                       `json:"workspace_dropped,omitempty"`
	SnapshotKey          string                       `json:"snapshot_key,omitempty"`
	CheckpointID         string                       `json:"checkpoint_id,omitempty"`
	PausedAt             time.Time                    `json:"paused_at,omitempty,omitzero"`
	PausedMillis         int64                        `json:"paused_ms,omitempty"`
	Egress               *egress.Policy               `json:"egress,omitempty"`
	EgressVersion        int                          `json:"egress_version,omitempty"`
	State                session.State                `json:"state"`
	Reason               session.Reason               `json:"reason,omitempty"`
	Generation           int                          `json:"generation"`
	TokenHashes          []string                     `json:"token_hashes,omitempty"`
	SandboxTokenHash     string                       `json:"sandbox_token_hash,omitempty"`
	BootstrapCodeHash    string                       `json:"bootstrap_code_hash,omitempty"`
	BootstrapExpires     int64                        `json:"bootstrap_expires,omitempty"`
	SandboxRef           string                       `json:"sandbox_ref,omitempty"`
	PushConnectionID     string                       `json:"push_connection_id,omitempty"`
	LaunchLease          int64                        `json:"launch_lease,omitempty"`
	GuardrailsHash       string                       `json:"guardrails_version_hash,omitempty"`
	ServedGuardrailsHash string                       `json:"served_guardrails_hash,omitempty"`
	PromptInjectedAt     time.Time                    `json:"prompt_injected_at,omitempty,omitzero"`
	TmuxSessionName      string                       `json:"tmux_session_name"`
	CreatedAt            time.Time                    `json:"created_at"`
	LiveTenant           string                       `json:"live_tenant,omitempty"`
	Streams              map[string]int64             `json:"streams,omitempty"`
	// Viewers is a string set (AddViewer, RemoveViewer), never written whole.
	Viewers        []string                    `json:"viewers,omitempty"`
	ViewerEpoch    int64                       `json:"viewer_epoch,omitempty"`
	ListKey        string                      `json:"list_key,omitempty"`
	WatchShard     string                      `json:"watch_shard,omitempty"`
	DueAt          int64                       `json:"due_at,omitempty"`
	UpdatedAt      time.Time                   `json:"updated_at"`
	ReadyAt        time.Time                   `json:"ready_at,omitempty,omitzero"`
	Resources      *sandboxwire.ResourceSample `json:"resources,omitempty"`
	RateLimitedAt  time.Time                   `json:"rate_limited_at,omitempty,omitzero"`
	ClaimBy        time.Time                   `json:"claim_by,omitempty,omitzero"`
	ClaimedAt      time.Time                   `json:"claimed_at,omitempty,omitzero"`
	LastActivityAt time.Time                   `json:"last_activity_at,omitempty,omitzero"`
	EndedAt        time.Time                   `json:"ended_at,omitempty,omitzero"`
	EventSeq       int64                       `json:"event_seq,omitempty"`
	HeartbeatAt    time.Time                   `json:"heartbeat_at,omitempty,omitzero"`
	ExpiresAt      int64                       `json:"expires_at,omitempty"`
	InputTokens    int64                       `json:"input_tokens,omitempty"`
	OutputTokens   int64                       `json:"output_tokens,omitempty"`
	CachedTokens   int64                       `json:"cached_tokens,omitempty"`
	ModelCalls     int64                       `json:"model_calls,omitempty"`
	CostMicroUSD   int64                       `json:"cost_micro_usd,omitempty"`
	UploadURLs     int64                       `json:"upload_urls,omitempty"`
	UploadBytes    int64                       `json:"upload_bytes,omitempty"`
	JobID          string                      `json:"job_id,omitempty"`
	JobTokenLimit  int64                       `json:"job_token_limit,omitempty"`
	Sandbox        *session.SandboxOptions     `json:"sandbox,omitempty"`
	EndsAt         int64                       `json:"ends_at,omitempty"`
}

// newSessionItem is new session s as Create stores it, with the keys that
// put it in the indexes: a session of a tenant in its tenant's fleet list
// (by_tenant), and, while it is live, in its live sessions (by_live); a
// session with a due time in the sweep's (by_due). An ended session gets its
// TTL.
func newSessionItem(s session.Session) sessionItem {
	it := sessionItem{
		ID:                   s.ID,
		ProjectName:          s.ProjectName,
		PersonaSlug:          s.PersonaSlug,
		InitialPrompt:        s.InitialPrompt,
		Features:             s.Features,
		AppKeyID:             s.AppKeyID,
		Tenant:               s.Tenant,
		SessionType:          s.SessionType,
		ClientType:           s.ClientType,
		ConfigurationID:      s.ConfigurationID,
		SystemPrompt:         s.SystemPrompt,
		AgentType:            s.AgentType,
		Workspace:            s.Workspace,
		AppLimits:            s.AppLimits,
		AppCaps:              s.AppCaps,
		AgentTypeOwner:       s.AgentTypeOwner,
		PoolSandbox:          s.PoolSandbox,
		TaskContext:          s.TaskContext,
		EndUser:              s.EndUser,
		WorkspaceStatus:      s.WorkspaceStatus,
		WorkspaceDropped:     s.WorkspaceDropped,
		SnapshotKey:          s.SnapshotKey,
		CheckpointID:         s.CheckpointID,
		PausedAt:             s.PausedAt,
		PausedMillis:         s.PausedFor.Milliseconds(),
		Egress:               s.Egress,
		EgressVersion:        s.EgressVersion,
		State:                s.State,
		Reason:               s.Reason,
		Generation:           s.Generation,
		TokenHashes:          s.TokenHashes,
		SandboxTokenHash:     s.SandboxTokenHash,
		BootstrapCodeHash:    s.BootstrapCodeHash,
		BootstrapExpires:     millis(s.BootstrapExpires),
		SandboxRef:           s.SandboxRef,
		PushConnectionID:     s.PushConnectionID,
		LaunchLease:          millis(s.LaunchLease),
		GuardrailsHash:       s.GuardrailsHash,
		ServedGuardrailsHash: s.ServedGuardrailsHash,
		PromptInjectedAt:     s.PromptInjectedAt,
		TmuxSessionName:      s.TmuxSessionName,
		CreatedAt:            s.CreatedAt,
		Streams:              streamsMillis(s.Streams),
		DueAt:                millis(s.DueAt),
		UpdatedAt:            s.UpdatedAt,
		ReadyAt:              s.ReadyAt,
		Resources:            s.Resources,
		RateLimitedAt:        s.RateLimitedAt,
		ClaimBy:              s.ClaimBy,
		ClaimedAt:            s.ClaimedAt,
		LastActivityAt:       s.LastActivityAt,
		EndedAt:              s.EndedAt,
		EventSeq:             s.LastSeq,
		HeartbeatAt:          s.HeartbeatAt,
		InputTokens:          s.InputTokens,
		OutputTokens:         s.OutputTokens,
		CachedTokens:         s.CachedTokens,
		ModelCalls:           s.ModelCalls,
		CostMicroUSD:         s.CostMicroUSD,
		UploadURLs:           s.UploadURLs,
		UploadBytes:          s.UploadBytes,
		JobID:                s.JobID,
		JobTokenLimit:        s.JobTokenLimit,
		Sandbox:              s.Sandbox,
		EndsAt:               millis(s.EndsAt),
	}
	if s.Tenant != "" {
		it.ListKey = session.ListKey(s.CreatedAt, s.ID)
		if slices.Contains(session.Live, s.State) {
			it.LiveTenant = s.Tenant
		}
	}
	if !s.DueAt.IsZero() {
		it.WatchShard = session.WatchShard(s.ID)
	}
	if s.State.Terminal() && !s.EndedAt.IsZero() {
		it.ExpiresAt = s.EndedAt.Add(session.Retention).Unix()
	}
	return it
}

// session is the item as the domain reads it.
func (it sessionItem) session() session.Session {
	s := session.Session{
		ID: it.ID,
		Blueprint: session.Blueprint{
			ProjectName:     it.ProjectName,
			PersonaSlug:     it.PersonaSlug,
			InitialPrompt:   it.InitialPrompt,
			Features:        it.Features,
			SessionType:     it.SessionType,
			ClientType:      it.ClientType,
			ConfigurationID: it.ConfigurationID,
			SystemPrompt:    it.SystemPrompt,
			AgentType:       it.AgentType,
			Workspace:       it.Workspace,
			AppLimits:       it.AppLimits,
			AppCaps:         it.AppCaps,
			AgentTypeOwner:  it.AgentTypeOwner,
			TaskContext:     it.TaskContext,
			EndUser:         it.EndUser,
			GuardrailsHash:  it.GuardrailsHash,
			TmuxSessionName: it.TmuxSessionName,
			JobID:           it.JobID,
			JobTokenLimit:   it.JobTokenLimit,
			Sandbox:         it.Sandbox,
		},
		AppKeyID:             it.AppKeyID,
		Tenant:               it.Tenant,
		WorkspaceStatus:      it.WorkspaceStatus,
		WorkspaceDropped:     it.WorkspaceDropped,
		SnapshotKey:          it.SnapshotKey,
		CheckpointID:         it.CheckpointID,
		PausedAt:             it.PausedAt,
		PausedFor:            time.Duration(it.PausedMillis) * time.Millisecond,
		Egress:               it.Egress,
		EgressVersion:        it.EgressVersion,
		State:                it.State,
		Reason:               it.Reason,
		Generation:           it.Generation,
		TokenHashes:          it.TokenHashes,
		SandboxTokenHash:     it.SandboxTokenHash,
		ServedGuardrailsHash: it.ServedGuardrailsHash,
		PromptInjectedAt:     it.PromptInjectedAt,
		CreatedAt:            it.CreatedAt,
		Streams:              streamsInstants(it.Streams),
		Viewers:              it.Viewers,
		ViewerEpoch:          it.ViewerEpoch,
		DueAt:                instant(it.DueAt),
		UpdatedAt:            it.UpdatedAt,
		ReadyAt:              it.ReadyAt,
		RateLimitedAt:        it.RateLimitedAt,
		ClaimBy:              it.ClaimBy,
		ClaimedAt:            it.ClaimedAt,
		LastActivityAt:       it.LastActivityAt,
		EndedAt:              it.EndedAt,
		LastSeq:              it.EventSeq,
		HeartbeatAt:          it.HeartbeatAt,
		EndsAt:               instant(it.EndsAt),
	}
	s.Launch = session.Launch{
		PoolSandbox: it.PoolSandbox, BootstrapCodeHash: it.BootstrapCodeHash, BootstrapExpires: instant(it.BootstrapExpires),
		LaunchLease: instant(it.LaunchLease), SandboxRef: it.SandboxRef, PushConnectionID: it.PushConnectionID, Resources: it.Resources,
	}
	s.Meter = session.Meter{InputTokens: it.InputTokens, OutputTokens: it.OutputTokens, CachedTokens: it.CachedTokens,
		ModelCalls: it.ModelCalls, CostMicroUSD: it.CostMicroUSD, UploadURLs: it.UploadURLs, UploadBytes: it.UploadBytes}
	return s
}

// millis is t in epoch milliseconds, the encoding of the instants the
// table compares with numbers (due_at); 0 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// instant is epoch milliseconds ms as a time; the zero time for 0.
func instant(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// streamsMillis is streams with its lapse times in epoch ms; nil for nil
// (no streams attribute), as OpenStream tells an absent map from an empty one.
func streamsMillis(streams map[string]time.Time) map[string]int64 {
	if streams == nil {
		return nil
	}
	out := make(map[string]int64, len(streams))
	for k, t := range streams {
		out[k] = t.UnixMilli()
	}
	return out
}

// streamsInstants is streamsMillis undone.
func streamsInstants(streams map[string]int64) map[string]time.Time {
	if streams == nil {
		return nil
	}
	out := make(map[string]time.Time, len(streams))
	for k, ms := range streams {
		out[k] = time.UnixMilli(ms).UTC()
	}
	return out
}
