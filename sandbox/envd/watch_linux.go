package envd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	pb "github.com/remote-agents/remote-agents/api/envd/filesystem"
)

// watchMask is what a watched folder reports: its entries created, moved
// in or out, written, removed and changed in mode. Symbolic links are not
// followed, so a watch stays below its root.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_ATTRIB |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// kernelWatch is one watcher's inotify instance: the folders it watches,
// by watch descriptor and by path.
type kernelWatch struct {
	w     *watcher
	fd    int
	file  *os.File
	dirs  map[uint32]string
	paths map[string]uint32
}

// notify has the kernel report w's changes; false when it cannot (then w
// polls).
func (w *watcher) notify() bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return false
	}
	// Non-blocking, so that reads wait in the runtime's poller and a close
	// ends them.
	k := &kernelWatch{w: w, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), dirs: map[uint32]string{}, paths: map[string]uint32{}}
	if err := k.add(w.root); err != nil {
		_ = k.file.Close()
		return false
	}
	if w.recursive {
		k.addBelow(w.root, nil)
	}
	go k.loop()
	return true
}

// add watches folder dir.
func (k *kernelWatch) add(dir string) error {
	if len(k.dirs) >= MaxWatchedEntries {
		return errors.New("too many folders watched")
	}
	wd, err := unix.InotifyAddWatch(k.fd, dir, watchMask)
	if err != nil {
		return err
	}
	id := uint32(wd) //nolint:gosec // a watch descriptor: positive, as the events carry it
	k.dirs[id], k.paths[dir] = dir, id
	return nil
}

// addBelow watches every folder below dir; with created, it gives a create
// for each entry found there (made before its folder was watched).
func (k *kernelWatch) addBelow(dir string, created func(string)) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if created != nil {
			created(p)
		}
		if d.IsDir() && k.add(p) != nil {
			return fs.SkipDir
		}
		return nil
	})
}

// forget stops watching dir and every folder below it (moved away or
// removed).
func (k *kernelWatch) forget(dir string) {
	for p, wd := range k.paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			_, _ = unix.InotifyRmWatch(k.fd, wd)
			delete(k.paths, p)
			delete(k.dirs, wd)
		}
	}
}

func (k *kernelWatch) loop() {
	go func() {
		<-k.w.quit
		_ = k.file.Close() // ends the read below
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := k.file.Read(buf)
		if err != nil {
			return
		}
		var evs []*pb.FilesystemEvent
		// Each event: its watch descriptor, mask, cookie and name's length
		// (struct inotify_event, in the machine's byte order), then the
		// name, NUL-padded.
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := binary.NativeEndian.Uint32(buf[off:])
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			end := off + unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			if end > n {
				break
			}
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:end], "\x00"))
			off = end
			evs = append(evs, k.changes(wd, mask, name)...)
		}
		k.w.record(evs...)
	}
}

// changes are what one inotify event of folder wd says of its entry name.
func (k *kernelWatch) changes(wd, mask uint32, name string) []*pb.FilesystemEvent {
	dir, ok := k.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		if ok {
			delete(k.dirs, wd)
			if k.paths[dir] == wd {
				delete(k.paths, dir)
			}
		}
		return nil
	}
	if !ok || name == "" {
		return nil // a folder we no longer watch, or an overflow of the queue
	}
	p := filepath.Join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	var out []*pb.FilesystemEvent
	add := func(p string, t pb.EventType) { out = append(out, k.w.event(p, t)) }
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		add(p, pb.EventType_EVENT_TYPE_CREATE)
		if isDir && k.w.recursive && k.add(p) == nil {
			// What was made in it before it was watched is reported made;
			// what moved in with it was there already.
			var created func(string)
			if mask&unix.IN_CREATE != 0 {
				created = func(q string) { add(q, pb.EventType_EVENT_TYPE_CREATE) }
			}
			k.addBelow(p, created)
		}
	case mask&unix.IN_MODIFY != 0:
		add(p, pb.EventType_EVENT_TYPE_WRITE)
	case mask&unix.IN_DELETE != 0:
		add(p, pb.EventType_EVENT_TYPE_REMOVE)
	case mask&unix.IN_MOVED_FROM != 0:
		add(p, pb.EventType_EVENT_TYPE_RENAME)
		if isDir {
			k.forget(p) // watched again where it lands, if below the root
		}
	case mask&unix.IN_ATTRIB != 0:
		add(p, pb.EventType_EVENT_TYPE_CHMOD)
	}
	return out
}
