package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "github.com/remote-agents/remote-agents/api/envd/filesystem"
)

// Limits of watchers.
const (
	// MaxWatchers bounds the watchers alive at once.
	MaxWatchers = 64
	// MaxWatchedEntries bounds what one watcher keeps track of: the
	// folders it has the kernel watch, or the entries it polls.
	MaxWatchedEntries = 20000
	// maxPendingEvents bounds the changes a watcher keeps until they are
	// taken.
	maxPendingEvents = 10000
	// watchInterval is how often a polling watcher looks.
	watchInterval = 100 * time.Millisecond
)

// state is what a watcher last saw of a path.
type state struct {
	mode    fs.FileMode
	size    int64
	modTime time.Time
}

// watcher records what is created, written, removed, renamed (by its old
// name; the new one is created) and has its mode changed in a folder (and,
// recursive, all below it), in the order it happens, as the kernel reports
// it (inotify, on Linux). Where the kernel cannot watch it (another
// system, or its watches used up), it looks every watchInterval instead:
// then changes are what differs between two looks, in path order, a rename
// is a remove and a create, and what lives less than the interval is not
// seen.
type watcher struct {
	s         *Server
	root      string
	recursive bool
	withEntry bool
	seen      map[string]state

	mu      sync.Mutex
	pending []*pb.FilesystemEvent
	wake    chan struct{}
	quit    chan struct{}
	once    sync.Once
}

// newWatcher starts watching path (read under the policy).
func (s *Server) newWatcher(path string, recursive, withEntry bool) (*watcher, error) {
	root, err := s.checkPath("read", path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("not a folder: "+path))
	}
	w := &watcher{s: s, root: root, recursive: recursive, withEntry: withEntry, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	if w.notify() {
		return w, nil
	}
	w.seen = w.scan()
	go w.loop()
	return w, nil
}

// record keeps evs for the next take and wakes a stream, dropping the
// oldest past maxPendingEvents. A write right after a write of the same
// file is one change.
func (w *watcher) record(evs ...*pb.FilesystemEvent) {
	if len(evs) == 0 {
		return
	}
	w.mu.Lock()
	for _, ev := range evs {
		if n := len(w.pending); n > 0 && ev.Type == pb.EventType_EVENT_TYPE_WRITE && w.pending[n-1].Type == ev.Type && w.pending[n-1].Name == ev.Name {
			w.pending[n-1] = ev
			continue
		}
		w.pending = append(w.pending, ev)
	}
	if over := len(w.pending) - maxPendingEvents; over > 0 {
		w.pending = slices.Delete(w.pending, 0, over)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// event is a change of p, a path below the root.
func (w *watcher) event(p string, t pb.EventType) *pb.FilesystemEvent {
	rel, _ := filepath.Rel(w.root, p)
	ev := &pb.FilesystemEvent{Name: rel, Type: t}
	if w.withEntry && t != pb.EventType_EVENT_TYPE_REMOVE && t != pb.EventType_EVENT_TYPE_RENAME {
		if e, err := w.s.entry(p); err == nil {
			ev.Entry = e
		}
	}
	return ev
}

// scan is what the folder holds now.
func (w *watcher) scan() map[string]state {
	out := map[string]state{}
	_ = filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == w.root {
			return nil
		}
		if len(out) >= MaxWatchedEntries {
			return fs.SkipAll
		}
		if info, err := d.Info(); err == nil {
			out[p] = state{mode: info.Mode(), size: info.Size(), modTime: info.ModTime()}
		}
		if d.IsDir() && !w.recursive {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

func (w *watcher) loop() {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-tick.C:
			now := w.scan()
			evs := w.diff(now)
			w.seen = now
			w.record(evs...)
		}
	}
}

// diff is the changes from what was seen to now, in path order.
func (w *watcher) diff(now map[string]state) []*pb.FilesystemEvent {
	var out []*pb.FilesystemEvent
	add := func(p string, t pb.EventType) { out = append(out, w.event(p, t)) }
	paths := make([]string, 0, len(now)+len(w.seen))
	for p := range now {
		paths = append(paths, p)
	}
	for p := range w.seen {
		if _, ok := now[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		was, before := w.seen[p]
		is, after := now[p]
		switch {
		case !before:
			add(p, pb.EventType_EVENT_TYPE_CREATE)
			if is.mode.IsRegular() && is.size > 0 {
				add(p, pb.EventType_EVENT_TYPE_WRITE)
			}
		case !after:
			add(p, pb.EventType_EVENT_TYPE_REMOVE)
		case was.mode != is.mode:
			add(p, pb.EventType_EVENT_TYPE_CHMOD)
		case is.mode.IsRegular() && (was.size != is.size || !was.modTime.Equal(is.modTime)):
			add(p, pb.EventType_EVENT_TYPE_WRITE)
		}
	}
	return out
}

// take returns the changes recorded since the last take.
func (w *watcher) take() []*pb.FilesystemEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.pending
	w.pending = nil
	return out
}

// stream sends each change as it is seen, and nil (a keepalive) after
// every keepalive interval of quiet, until ctx ends.
func (w *watcher) stream(ctx context.Context, keepalive time.Duration, send func(*pb.FilesystemEvent) error) error {
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := send(nil); err != nil {
				return err
			}
		case <-w.wake:
			for _, ev := range w.take() {
				if err := send(ev); err != nil {
					return err
				}
			}
			tick.Reset(keepalive)
		}
	}
}

func (w *watcher) stop() { w.once.Do(func() { close(w.quit) }) }

// watchers are the polling watchers, by id.
type watchers struct {
	mu   sync.Mutex
	byID map[string]*watcher
}

func newWatchers() *watchers { return &watchers{byID: map[string]*watcher{}} }

func (ws *watchers) add(w *watcher) (string, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.byID) >= MaxWatchers {
		return "", connect.NewError(connect.CodeResourceExhausted, errors.New("too many watchers: remove one first"))
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ws.byID[id] = w
	return id, nil
}

func (ws *watchers) get(id string) (*watcher, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.byID[id]; ok {
		return w, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such watcher"))
}

func (ws *watchers) remove(id string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.byID[id]
	if !ok {
		return connect.NewError(connect.CodeNotFound, errors.New("no such watcher"))
	}
	w.stop()
	delete(ws.byID, id)
	return nil
}

func (ws *watchers) closeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, w := range ws.byID {
		w.stop()
		delete(ws.byID, id)
	}
}
