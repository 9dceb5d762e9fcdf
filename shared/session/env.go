package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Limits of env submissions.
const (
	MaxEnvKeys       = 50
	MaxEnvValueBytes = 32 * 1024
	MaxEnvBytes      = sandboxwire.MaxEnvBytes
)

// EnvPrefix is where a session's submitted env values are kept.
func EnvPrefix(id string) string { return "sessions/" + id + "/env/" }

var envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,199}$`)

// EnvSubmission is a user's answer to the agent's request_env_variables. Every
// value reaches the session's env file; which are also persisted for later
// sessions of the session's configuration is the submission's to say
// (agent-contract.md 6.6): each secret by its Persist, and the keys that do not
// say (Values, secrets without Persist) by SaveToConfiguration.
type EnvSubmission struct {
	// Values are keys and values that say nothing about persistence.
	Values map[string]string `json:"values,omitempty"`
	// Secrets are keys and values, each of which may say whether it persists.
	Secrets []EnvSecret `json:"secrets,omitempty"`
	// SaveToConfiguration persists the keys that do not say.
	SaveToConfiguration bool `json:"saveToConfiguration,omitempty"`
}

// EnvSecret is one submitted value.
type EnvSecret struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Persist, if set, says whether the value is kept for the configuration;
	// if absent, the submission's SaveToConfiguration decides.
	Persist *bool `json:"persist,omitempty"`
}

// EnvReceipt answers an env submission: the keys delivered, and those of them
// persisted for the configuration.
type EnvReceipt struct {
	AgentID   string   `json:"agent_id"`
	Status    string   `json:"status"`
	Keys      []string `json:"keys"`
	Persisted []string `json:"persisted"`
}

// split checks a submission and returns all its values, and those to persist.
func (in EnvSubmission) split() (all, persist map[string]string, err error) {
	all, persist = map[string]string{}, map[string]string{}
	add := func(k, v string, keep bool) error {
		if !envKeyPattern.MatchString(k) {
			return apierror.New(apierror.InvalidRequest, "%q is not an environment variable name.", k)
		}
		if len(v) > MaxEnvValueBytes {
			return apierror.New(apierror.InvalidRequest, "The value of %s is larger than %d bytes.", k, MaxEnvValueBytes)
		}
		if _, dup := all[k]; dup {
			return apierror.New(apierror.InvalidRequest, "%s is sent twice.", k)
		}
		all[k] = v
		if keep {
			persist[k] = v
		}
		return nil
	}
	if n := len(in.Values) + len(in.Secrets); n == 0 || n > MaxEnvKeys {
		return nil, nil, apierror.New(apierror.InvalidRequest, "Send 1 to %d values.", MaxEnvKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(in.Values)) { // in order: the same request, the same error
		if err := add(k, in.Values[k], in.SaveToConfiguration); err != nil {
			return nil, nil, err
		}
	}
	for _, s := range in.Secrets {
		keep := in.SaveToConfiguration
		if s.Persist != nil {
			keep = *s.Persist
		}
		if err := add(s.Key, s.Value, keep); err != nil {
			return nil, nil, err
		}
	}
	return all, persist, nil
}

// SubmitEnv hands values a user entered (for the agent's request_env_variables)
// to the sandbox of sess (see Authorize), which writes them to its env file,
// and persists those the submission says to for the session's configuration.
// The values are kept in the object store (the session's under the session, the
// persisted ones sealed under the configuration) and reach only sandboxes; the
// env.submitted event names the keys.
func (s *Inbox) SubmitEnv(ctx context.Context, sess Session, in EnvSubmission) (EnvReceipt, error) {
	id := sess.ID
	values, persist, err := in.split()
	if err != nil {
		return EnvReceipt{}, err
	}
	keys, kept := sortedKeys(values), sortedKeys(persist)
	if !slices.Contains(Running, sess.State) {
		return EnvReceipt{}, apierror.New(apierror.AgentNotAlive, "The agent is %s; values can only be sent to a running agent.", sess.State)
	}
	if len(kept) > 0 && sess.ConfigurationID == "" {
		return EnvReceipt{}, apierror.New(apierror.InvalidRequest, "The agent has no configuration to persist %s for; send it without persist or saveToConfiguration.", kept[0])
	}
	if s.o.Blob == nil {
		return EnvReceipt{}, errors.New("env submissions need an object store")
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return EnvReceipt{}, fmt.Errorf("encode env values: %w", err)
	}
	// Named by when (then at random), so that they list in order.
	ref := EnvPrefix(id) + fmt.Sprintf("%020d-", s.o.Now().UnixNano()) + newID() + ".json"
	if err := s.o.Blob.Put(ctx, ref, bytes.NewReader(raw), int64(len(raw)), "application/json"); err != nil {
		return EnvReceipt{}, err
	}
	if len(kept) > 0 {
		if err := persistEnv(ctx, s.o.Secrets, sess.Tenant, sess.ConfigurationID, persist); err != nil {
			return EnvReceipt{}, err
		}
	}
	ev, err := NewEvent(sandboxwire.EnvSubmitted{Keys: keys, Ref: ref, Persisted: kept})
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
	return EnvReceipt{AgentID: id, Status: "submitted", Keys: keys, Persisted: kept}, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MaxSubmittedEnvObjects bounds how many submissions SubmittedEnv reads.
const MaxSubmittedEnvObjects = 200

// SubmittedEnv is every env value users submitted to session id, the later
// submission of a key over the earlier: what a resumed sandbox's env file
// gets back, since a checkpoint keeps no value, only the session's
// reference to them (its folder of submissions).
func SubmittedEnv(ctx context.Context, store blob.Store, id string) (map[string]string, error) {
	var objs []blob.Object
	after := ""
	for len(objs) < MaxSubmittedEnvObjects {
		page, err := store.List(ctx, EnvPrefix(id), after, 0)
		if err != nil {
			return nil, fmt.Errorf("env submissions of %s: %w", id, err)
		}
		objs = append(objs, page.Objects...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	// In key order, which is the order they were written (SubmitEnv).
	out := map[string]string{}
	for _, o := range objs {
		r, _, err := store.Get(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("env submission %s: %w", o.Key, err)
		}
		var values map[string]string
		err = json.NewDecoder(io.LimitReader(r, sandboxwire.MaxEnvBytes)).Decode(&values)
		_ = r.Close()
		if err != nil {
			continue // damaged: the inbox skips it too
		}
		maps.Copy(out, values)
	}
	return out, nil
}
