package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/remote-agents/remote-agents/sandbox/policy"
)

// Limits of memory.
const (
	maxMemoryKeys = 1000
)

// memory is a small key-value store kept in one JSON file, written atomically.
type memory struct {
	mu   sync.Mutex
	path string
}

func (m *memory) load() (map[string]string, error) {
	data := map[string]string{}
	raw, err := os.ReadFile(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return data, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("memory file is damaged: %w", err)
	}
	return data, nil
}

// with runs fn on the stored data under the lock, and saves the data when fn
// says it changed it.
func (m *memory) with(fn func(data map[string]string) (string, bool, error)) (string, error) {
	if m.path == "" {
		return "", errors.New("memory is not configured")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := m.load()
	if err != nil {
		return "", err
	}
	out, changed, err := fn(data)
	if err != nil || !changed {
		return out, err
	}
	raw, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		return "", fmt.Errorf("memory: %w", err)
	}
	// The memory is the agent's own, not its commands': it stays the agent's user's.
	if err := writeFile(nil, m.path, raw); err != nil {
		return "", err
	}
	return out, nil
}

// memoryTools are memory_read and memory_write over the file at path, each key
// checked by the policy.
func memoryTools(p *policy.Policy, path string) []Tool {
	m := &memory{path: path}
	return []Tool{
		{
			Name:        "memory_read",
			Description: "Read a value you stored earlier with memory_write (it survives between goals and runs).",
			Schema: `{"type":"object","additionalProperties":false,"required":["key"],"properties":{
				"key":{"type":"string","minLength":1,"maxLength":256}}}`,
			Run: func(_ context.Context, raw json.RawMessage) (string, error) {
				a, err := decode[struct{ Key string }](raw)
				if err != nil {
					return "", err
				}
				if err := p.CheckKey("memory_read", a.Key); err != nil {
					return "", err
				}
				return m.with(func(data map[string]string) (string, bool, error) {
					v, ok := data[a.Key]
					if !ok {
						return "", false, fmt.Errorf("nothing stored under %q", a.Key)
					}
					return v, false, nil
				})
			},
		},
		{
			Name:        "memory_write",
			Description: "Store a value under a key, for later goals and runs to read with memory_read.",
			Schema: `{"type":"object","additionalProperties":false,"required":["key","value"],"properties":{
				"key":{"type":"string","minLength":1,"maxLength":256},
				"value":{"type":"string","maxLength":65536}}}`,
			Run: func(_ context.Context, raw json.RawMessage) (string, error) {
				a, err := decode[struct{ Key, Value string }](raw)
				if err != nil {
					return "", err
				}
				if err := p.CheckKey("memory_write", a.Key); err != nil {
					return "", err
				}
				return m.with(func(data map[string]string) (string, bool, error) {
					if _, exists := data[a.Key]; !exists && len(data) >= maxMemoryKeys {
						return "", false, fmt.Errorf("memory holds %d keys already", maxMemoryKeys)
					}
					data[a.Key] = a.Value
					return fmt.Sprintf("stored %q", a.Key), true, nil
				})
			},
		},
	}
}
