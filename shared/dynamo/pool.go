package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Pool is the warm pool's store: one registry item per pool sandbox
// ("pool#<id>"), listed per agent type through the by_kind index (kind
// "pool", name "<owner>#<type>#<id>"), and a replenish lease per type
// ("poollock#<owner>#<type>"). Claims are transactions with the sessions
// table.
type Pool struct {
	api      API
	registry *Table
	sessions *Table
	now      func() time.Time
}

// NewPool returns the pool store over the registry and sessions tables.
func NewPool(api API, registryTable, sessionsTable string) *Pool {
	return &Pool{api: api, registry: NewTable(api, registryTable), sessions: NewTable(api, sessionsTable), now: time.Now}
}

var _ pool.Store = (*Pool)(nil)

// Item prefixes of the pool in the registry (access.PoolItems).
const (
	kindPool       = "pool"
	poolLockPrefix = "poollock#"
)

type poolItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	pool.Sandbox
	ExpiresAt int64 `json:"expires_at,omitempty"`
}

func poolKey(id string) registryKey { return registryKey{PK: kindPool + "#" + id, SK: kindPool} }

func poolName(owner, agentType string) string { return owner + "#" + agentType + "#" }

// Add registers a new pool sandbox.
func (p *Pool) Add(ctx context.Context, s pool.Sandbox) error {
	it := poolItem{registryKey: poolKey(s.ID), Kind: kindPool, Name: poolName(s.Owner, s.AgentType) + s.ID, Sandbox: s,
		ExpiresAt: time.UnixMilli(s.CreatedAt).Add(48 * time.Hour).Unix()}
	return p.registry.Put(ctx, it, expression.AttributeNotExists(expression.Name("pk")))
}

// Get returns the pool sandbox id.
func (p *Pool) Get(ctx context.Context, id string) (pool.Sandbox, error) {
	var it poolItem
	if err := p.registry.Get(ctx, poolKey(id), &it); err != nil {
		if errors.Is(err, ErrNotFound) {
			return pool.Sandbox{}, fmt.Errorf("pool sandbox %s: %w", id, pool.ErrNotFound)
		}
		return pool.Sandbox{}, err
	}
	return it.Sandbox, nil
}

// List returns the pool sandboxes of one agent type.
func (p *Pool) List(ctx context.Context, owner, agentType string) ([]pool.Sandbox, error) {
	key := expression.Key("kind").Equal(expression.Value(kindPool)).And(expression.Key("name").BeginsWith(poolName(owner, agentType)))
	return p.list(ctx, key)
}

// ListAll returns every pool sandbox, at most pool.MaxSandboxes.
func (p *Pool) ListAll(ctx context.Context) ([]pool.Sandbox, error) {
	return p.list(ctx, expression.Key("kind").Equal(expression.Value(kindPool)))
}

func (p *Pool) list(ctx context.Context, key expression.KeyConditionBuilder) ([]pool.Sandbox, error) {
	var out []pool.Sandbox
	var after Cursor
	for len(out) < pool.MaxSandboxes {
		var page []poolItem
		next, err := p.registry.Query(ctx, Query{Index: resources.RegistryByKind, Key: key, After: after, Limit: MaxPageSize}, &page)
		if err != nil {
			return nil, fmt.Errorf("list the pool: %w", err)
		}
		for _, it := range page {
			out = append(out, it.Sandbox)
		}
		if after = next; after == "" {
			break
		}
	}
	return out, nil
}

// update applies up to pool sandbox id under cond, mapping a failed
// condition to pool.ErrNotFound (no item) or pool.ErrTaken.
func (p *Pool) update(ctx context.Context, id string, up expression.UpdateBuilder, out any, cond expression.ConditionBuilder) error {
	cond = expression.AttributeExists(expression.Name("pk")).And(cond)
	err := p.registry.Update(ctx, poolKey(id), up, out, cond)
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		if len(cf.Item) == 0 {
			return fmt.Errorf("pool sandbox %s: %w", id, pool.ErrNotFound)
		}
		return fmt.Errorf("pool sandbox %s: %w", id, pool.ErrTaken)
	}
	return err
}

func poolStates(states ...pool.State) expression.ConditionBuilder {
	ops := make([]expression.OperandBuilder, 0, len(states))
	for _, s := range states {
		ops = append(ops, expression.Value(s))
	}
	if len(ops) == 1 {
		return expression.Name("state").Equal(ops[0])
	}
	return expression.Name("state").In(ops[0], ops[1:]...)
}

// SetRef records the launcher's reference of a warm sandbox.
func (p *Pool) SetRef(ctx context.Context, id, ref string) error {
	return p.update(ctx, id, expression.Set(expression.Name("sandbox_ref"), expression.Value(ref)), nil, poolStates(pool.Starting, pool.Idle))
}

// RedeemLaunchCode spends a starting sandbox's unexpired launch code.
func (p *Pool) RedeemLaunchCode(ctx context.Context, id, codeHash, keyHash string, now time.Time) error {
	code, expires := expression.Name("launch_code_hash"), expression.Name("code_expires")
	up := expression.Set(expression.Name("key_hash"), expression.Value(keyHash)).Remove(code).Remove(expires).
		Set(expression.Name("heartbeat_at"), expression.Value(now.UnixMilli()))
	cond := poolStates(pool.Starting).And(code.Equal(expression.Value(codeHash))).And(expires.GreaterThan(expression.Value(now.UnixMilli())))
	return p.update(ctx, id, up, nil, cond)
}

// Heartbeat records a sign of life of a warm sandbox.
func (p *Pool) Heartbeat(ctx context.Context, id string, idle bool, now time.Time) (pool.Sandbox, error) {
	up := expression.Set(expression.Name("heartbeat_at"), expression.Value(now.UnixMilli()))
	var it poolItem
	err := p.update(ctx, id, up, &it, poolStates(pool.Idle))
	if errors.Is(err, pool.ErrTaken) {
		if !idle {
			err = p.update(ctx, id, up, &it, poolStates(pool.Starting))
		} else {
			up = up.Set(expression.Name("state"), expression.Value(pool.Idle)).Set(expression.Name("idle_at"), expression.Value(now.UnixMilli()))
			err = p.update(ctx, id, up, &it, poolStates(pool.Starting).And(expression.AttributeExists(expression.Name("key_hash"))))
		}
	}
	if errors.Is(err, pool.ErrTaken) {
		return p.Get(ctx, id) // claimed meanwhile
	}
	return it.Sandbox, err
}

// SetPushConnection records the sandbox's push connection.
func (p *Pool) SetPushConnection(ctx context.Context, id, connectionID string) error {
	err := p.update(ctx, id, expression.Set(expression.Name("push_connection_id"), expression.Value(connectionID)), nil,
		expression.AttributeExists(expression.Name("key_hash")))
	if errors.Is(err, pool.ErrTaken) {
		return fmt.Errorf("pool sandbox %s: %w", id, pool.ErrNotFound)
	}
	return err
}

// Claim claims s for c's session in one transaction (see pool.Store).
func (p *Pool) Claim(ctx context.Context, s pool.Sandbox, c pool.Claim) error {
	at := c.At.UnixMilli()
	claim := p.registry.UpdateOp(poolKey(s.ID),
		expression.Set(expression.Name("state"), expression.Value(pool.Claimed)).
			Set(expression.Name("claimed_by"), expression.Value(c.SessionID)).
			Set(expression.Name("claimed_at"), expression.Value(at)).
			Set(expression.Name("expires_at"), expression.Value(c.At.Add(pool.ClaimedRetention).Unix())),
		poolStates(pool.Idle).
			And(expression.Name("version").Equal(expression.Value(s.Version))).
			And(expression.Name("key_hash").Equal(expression.Value(s.KeyHash))))
	sessionUp := expression.Set(expression.Name("sandbox_ref"), expression.Value(s.Ref)).
		Set(expression.Name("bootstrap_code_hash"), expression.Value(s.KeyHash)).
		Set(expression.Name("bootstrap_expires"), expression.Value(c.CodeExpires.UnixMilli())).
		Set(expression.Name("tmux_session_name"), expression.Value(s.TmuxSessionName)).
		Set(expression.Name("pool_sandbox"), expression.Value(s.ID)).
		Remove(expression.Name("sandbox_token_hash")).
		Remove(expression.Name("push_connection_id")).
		Set(expression.Name("updated_at"), expression.Value(c.At.UTC().Format(time.RFC3339Nano)))
	sessionCond := expression.AttributeExists(expression.Name("session_id")).
		And(inStates(session.Starting)).
		And(expression.Name("generation").Equal(expression.Value(c.Generation))).
		And(expression.AttributeNotExists(expression.Name("sandbox_ref"))).
		And(expression.AttributeNotExists(expression.Name("launch_lease")))
	assign := p.sessions.UpdateOp(sessionKey{c.SessionID}, sessionUp, sessionCond)
	err := Transact(ctx, p.api, "", claim, assign)
	var tx *TxCanceledError
	if errors.As(err, &tx) && len(tx.Reasons) == 2 {
		if tx.Reasons[1] == "ConditionalCheckFailed" {
			return fmt.Errorf("claim %s for %s: %w", s.ID, c.SessionID, pool.ErrSessionMoved)
		}
		if tx.Reasons[0] == "ConditionalCheckFailed" {
			return fmt.Errorf("claim %s for %s: %w", s.ID, c.SessionID, pool.ErrTaken)
		}
	}
	return err
}

// Remove deletes the sandbox id if it is in one of states.
func (p *Pool) Remove(ctx context.Context, id string, states ...pool.State) error {
	cond := expression.AttributeNotExists(expression.Name("pk")).Or(poolStates(states...))
	err := p.registry.Delete(ctx, poolKey(id), cond)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("pool sandbox %s: %w", id, pool.ErrTaken)
	}
	return err
}

type poolLock struct {
	registryKey
	LeaseUntil int64 `json:"lease_until"`
	ExpiresAt  int64 `json:"expires_at"`
}

func poolLockKey(owner, agentType string) registryKey {
	return registryKey{PK: poolLockPrefix + owner + "#" + agentType, SK: kindPool}
}

// Lock takes a type's replenish lease, unless another holds it unexpired.
func (p *Pool) Lock(ctx context.Context, owner, agentType string, now, until time.Time) (bool, error) {
	lease := expression.Name("lease_until")
	err := p.registry.Put(ctx, poolLock{registryKey: poolLockKey(owner, agentType), LeaseUntil: until.UnixMilli(), ExpiresAt: until.Add(time.Hour).Unix()},
		expression.AttributeNotExists(expression.Name("pk")).Or(lease.LessThan(expression.Value(now.UnixMilli()))))
	if errors.Is(err, ErrConditionFailed) {
		return false, nil
	}
	return err == nil, err
}

// Unlock gives a type's replenish lease up.
func (p *Pool) Unlock(ctx context.Context, owner, agentType string) error {
	return p.registry.Delete(ctx, poolLockKey(owner, agentType))
}
