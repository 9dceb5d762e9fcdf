package secrets

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// Memory is a Store in this process's memory: the dev server's (its
// values live as long as it runs, in no file a sandbox could read).
type Memory struct {
	mu sync.Mutex
	m  map[string]Stored // by tenant and name
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[string]Stored{}} }

func memKey(tenant, name string) string { return tenant + "\x00" + name }

// Put creates or replaces a secret.
func (m *Memory) Put(_ context.Context, tenant string, s Stored) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Inject = slices.Clone(s.Inject)
	m.m[memKey(tenant, s.Name)] = s
	return nil
}

// Get returns a secret; ErrNotFound if none.
func (m *Memory) Get(_ context.Context, tenant, name string) (Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[memKey(tenant, name)]
	if !ok {
		return Stored{}, ErrNotFound
	}
	s.Inject = slices.Clone(s.Inject)
	return s, nil
}

// Delete removes a secret; ErrNotFound if none.
func (m *Memory) Delete(_ context.Context, tenant, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[memKey(tenant, name)]; !ok {
		return ErrNotFound
	}
	delete(m.m, memKey(tenant, name))
	return nil
}

// List returns a tenant's secrets, by name, without their values.
func (m *Memory) List(_ context.Context, tenant string) ([]Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Secret
	for k, s := range m.m {
		if strings.HasPrefix(k, tenant+"\x00") { // the owner's, not its users' (another owner)
			s.Inject = slices.Clone(s.Inject)
			out = append(out, s.Secret)
		}
	}
	slices.SortFunc(out, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
