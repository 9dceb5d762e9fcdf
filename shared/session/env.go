package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Limits of env submissions.
const (
	MaxEnvKeys       = 50
	MaxEnvValueBytes = 32 * 1024
	MaxEnvBytes      = sandboxwire.MaxEnvBytes
)

// envPrefix is where a session's submitted env values are kept.
func envPrefix(id string) string { return "sessions/" + id + "/env/" }

var envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,199}$`)

// EnvReceipt answers an env submission.
type EnvReceipt struct {
	AgentID string   `json:"agent_id"`
	Status  string   `json:"status"`
	Keys    []string `json:"keys"`
}

// SubmitEnv hands values a user entered (for the agent's request_env_variables)
// to the sandbox of sess (see Authorize), which writes them to its env file. The
// values are kept in the object store under the session and reach only the sandbox.
func (s *Service) SubmitEnv(ctx context.Context, sess Session, values map[string]string) (EnvReceipt, error) {
	id := sess.ID
	if len(values) == 0 || len(values) > MaxEnvKeys {
		return EnvReceipt{}, apierror.New(apierror.InvalidRequest, "Send 1 to %d values.", MaxEnvKeys)
	}
	keys := make([]string, 0, len(values))
	for k, v := range values {
		if !envKeyPattern.MatchString(k) {
			return EnvReceipt{}, apierror.New(apierror.InvalidRequest, "%q is not an environment variable name.", k)
		}
		if len(v) > MaxEnvValueBytes {
			return EnvReceipt{}, apierror.New(apierror.InvalidRequest, "The value of %s is larger than %d bytes.", k, MaxEnvValueBytes)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Contains(Running, sess.State) {
		return EnvReceipt{}, apierror.New(apierror.AgentNotAlive, "The agent is %s; values can only be sent to a running agent.", sess.State)
	}
	if s.o.Blob == nil {
		return EnvReceipt{}, errors.New("env submissions need an object store")
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return EnvReceipt{}, fmt.Errorf("encode env values: %w", err)
	}
	ref := envPrefix(id) + newID() + ".json"
	if err := s.o.Blob.Put(ctx, ref, bytes.NewReader(raw), int64(len(raw)), "application/json"); err != nil {
		return EnvReceipt{}, err
	}
	ev, err := NewEvent(sandboxwire.EnvSubmitted{Keys: keys, Ref: ref})
	if err != nil {
		return EnvReceipt{}, err
	}
	_, err = s.o.Store.AppendEvents(ctx, id, sess.Generation, []Event{ev})
	if errors.Is(err, ErrConflict) {
		return EnvReceipt{}, apierror.New(apierror.AgentNotAlive, "The agent has stopped.")
	}
	if err != nil {
		return EnvReceipt{}, err
	}
	return EnvReceipt{AgentID: id, Status: "submitted", Keys: keys}, nil
}
