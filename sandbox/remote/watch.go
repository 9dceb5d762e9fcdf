package remote

import (
	"sync"
	"sync/atomic"
)

// watchState says whether a viewer watches the agent, as the platform last
// said: pushed (sandboxwire.PushWatch) or in an answer (Orders), whichever
// came with the highest epoch, so that an answer read before a viewer came
// but received after the push that says it came changes nothing.
type watchState struct {
	mu    sync.Mutex
	epoch int64
	on    atomic.Bool
}

// set takes the platform's word that viewers watch, as of epoch.
func (w *watchState) set(viewers int, epoch int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if epoch < w.epoch {
		return
	}
	w.epoch = epoch
	w.on.Store(viewers > 0)
}

// watched says whether anyone watches.
func (w *watchState) watched() bool { return w.on.Load() }
