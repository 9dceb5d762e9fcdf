package envd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/remote-agents/remote-agents/api/envd/filesystem"
)

// Limits of the filesystem service.
const (
	// MaxListEntries bounds what one ListDir answers.
	MaxListEntries = 10000
	// MaxListDepth bounds how deep ListDir goes.
	MaxListDepth = 16
)

// checkPath resolves path (relative to Home) and checks it for the tool
// (read or write) under the policy: permission_denied when it may not.
func (s *Server) checkPath(tool, path string) (string, error) {
	if path == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("path is required"))
	}
	if !filepath.IsAbs(path) && s.o.Home != "" {
		path = filepath.Join(s.o.Home, path)
	}
	path = s.localPath(path)
	if s.o.Policy == nil {
		return filepath.Clean(path), nil
	}
	resolved, err := s.o.Policy.CheckPath(tool, path)
	if err != nil {
		return "", connect.NewError(connect.CodePermissionDenied, err)
	}
	return resolved, nil
}

// fsError is err as the SDKs read it: not_found, already_exists,
// permission_denied or invalid_argument where it says so.
func fsError(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// localPath is the sandbox's path of a path the client names: under
// HomeAlias, the same under Home.
func (s *Server) localPath(path string) string {
	if rest, ok := cutHome(filepath.Clean(path), s.o.HomeAlias); ok && s.o.Home != "" {
		return filepath.Join(s.o.Home, rest)
	}
	return path
}

// clientPath is path as the client names it: under Home, the same under
// HomeAlias.
func (s *Server) clientPath(path string) string {
	if rest, ok := cutHome(path, s.o.Home); ok && s.o.HomeAlias != "" {
		return filepath.Join(s.o.HomeAlias, rest)
	}
	return path
}

// cutHome is path relative to home ("." for home itself), if it is in it.
func cutHome(path, home string) (string, bool) {
	if home == "" {
		return "", false
	}
	if path == home {
		return ".", true
	}
	rest, ok := strings.CutPrefix(path, strings.TrimSuffix(home, "/")+"/")
	return rest, ok
}

// entry describes the file at path (not following a last link).
func (s *Server) entry(path string) (*pb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return s.entryOf(path, fi), nil
}

func (s *Server) entryOf(path string, fi fs.FileInfo) *pb.EntryInfo {
	e := &pb.EntryInfo{Name: fi.Name(), Path: s.clientPath(path), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), ModifiedTime: timestamppb.New(fi.ModTime())}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		if target, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &target
		}
		// What a link leads to is what the SDKs show.
		if to, err := os.Stat(path); err == nil {
			e.Type = fileType(to)
		}
	default:
		e.Type = fileType(fi)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = userName(st.Uid), groupName(st.Gid)
	}
	return e
}

func fileType(fi fs.FileInfo) pb.FileType {
	switch {
	case fi.IsDir():
		return pb.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode().IsRegular():
		return pb.FileType_FILE_TYPE_FILE
	}
	return pb.FileType_FILE_TYPE_UNSPECIFIED
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}

// own gives what envd made at path to the tool user.
func (s *Server) own(path string) {
	if s.o.Owned != nil {
		if err := s.o.Owned(path); err != nil {
			s.o.Log.Warn("envd: give a new file to the tool user", "path", path, "error", err.Error())
		}
	}
}

// filesystemService serves filesystem.Filesystem.
type filesystemService struct{ s *Server }

func (f *filesystemService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	path, err := f.s.checkPath("read", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := f.s.entry(path)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

// MakeDir makes a folder and the folders above it; already_exists when it
// is there.
func (f *filesystemService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	path, err := f.s.checkPath("write", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("the folder exists: "+req.Msg.GetPath()))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a file has that path: "+req.Msg.GetPath()))
	}
	if err := f.s.mkdirAll(path); err != nil {
		return nil, fsError(err)
	}
	e, err := f.s.entry(path)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

// mkdirAll makes path and the folders above it that are missing, each the
// tool user's.
func (s *Server) mkdirAll(path string) error {
	var made []string
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		made = append(made, p)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	for _, p := range made {
		s.own(p)
	}
	return nil
}

// Move renames a file or folder, making the folders above its new path.
func (f *filesystemService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	src, err := f.s.checkPath("write", req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := f.s.checkPath("write", req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError(err)
	}
	if err := f.s.mkdirAll(filepath.Dir(dst)); err != nil {
		return nil, fsError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError(err)
	}
	e, err := f.s.entry(dst)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

// ListDir lists a folder, depth levels down (0: 1), in lexical order.
func (f *filesystemService) ListDir(_ context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	root, err := f.s.checkPath("read", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("not a folder: "+req.Msg.GetPath()))
	}
	depth := int(min(max(req.Msg.GetDepth(), 1), MaxListDepth))
	out := &pb.ListDirResponse{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable below: left out
		}
		if p == root {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if len(out.Entries) >= MaxListEntries {
			return fs.SkipAll
		}
		out.Entries = append(out.Entries, f.s.entryOf(p, info))
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && depthOf(rel) >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(out), nil
}

// depthOf is how many levels rel is below its root (a/b: 2).
func depthOf(rel string) int {
	n := 1
	for _, c := range rel {
		if c == filepath.Separator {
			n++
		}
	}
	return n
}

// Remove removes a file, or a folder and all it holds.
func (f *filesystemService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	path, err := f.s.checkPath("write", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err != nil {
		return nil, fsError(err)
	}
	if err := os.RemoveAll(path); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// WatchDir streams a folder's changes: a start event, then each change
// (its path relative to the folder), with keepalives in between.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	w, err := f.s.newWatcher(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer w.stop()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	return w.stream(ctx, keepaliveOf(req.Header()), func(ev *pb.FilesystemEvent) error {
		if ev == nil {
			return stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}})
		}
		return stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: ev}})
	})
}

// CreateWatcher starts a watcher whose changes GetWatcherEvents takes.
func (f *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	w, err := f.s.newWatcher(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	id, err := f.s.watch.add(w)
	if err != nil {
		w.stop()
		return nil, err
	}
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents takes the changes a watcher saw since the last call.
func (f *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	w, err := f.s.watch.get(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: w.take()}), nil
}

// RemoveWatcher stops a watcher.
func (f *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	if err := f.s.watch.remove(req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}
