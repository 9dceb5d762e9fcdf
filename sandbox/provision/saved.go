package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// RestoreTimeout bounds the download of a snapshot.
const RestoreTimeout = 30 * time.Minute

// restore downloads the configuration's snapshot and unpacks it into the
// workspace (Extract); a snapshot that cannot be read, or that breaks a
// rule, is a warning and leaves the workspace as it was.
func (p *provisioner) restore(ctx context.Context, snap *sandboxwire.SavedSnapshot) {
	p.begin(ctx, sandboxwire.WorkspaceRestoring{SizeBytes: snap.SizeBytes, SavedAt: snap.SavedAt})
	ctx, cancel := context.WithTimeout(ctx, RestoreTimeout)
	defer cancel()
	f, err := os.CreateTemp("", "restore-*.tar.gz")
	if err != nil {
		p.warn(ctx, "restore", fmt.Sprintf("the snapshot was not restored: %v", err))
		return
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	if err := p.download(ctx, snap.URL, f); err != nil {
		p.warn(ctx, "restore", "the snapshot was not restored: "+err.Error())
		return
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		p.warn(ctx, "restore", fmt.Sprintf("the snapshot was not restored: %v", err))
		return
	}
	n, err := Extract(f, p.o.Dir, p.o.Limits, p.o.User)
	var no *RefusedError
	switch {
	case errors.As(err, &no):
		p.warn(ctx, "restore", "the snapshot was not restored: "+no.Error())
	case err != nil:
		p.warn(ctx, "restore", fmt.Sprintf("the snapshot was restored in part (%d entries) and then failed: %v", n, err))
	default:
		p.o.Log.Info("snapshot restored", "entries", n)
	}
}

// download copies the archive at url (at most MaxSnapshotBytes) to w.
func (p *provisioner) download(ctx context.Context, url string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return errors.New("its URL is not one")
	}
	client := p.o.HTTP
	if client == nil {
		client = &http.Client{}
	}
	res, err := client.Do(req)
	if err != nil {
		return errors.New("the object store could not be reached")
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the object store answered %d", res.StatusCode)
	}
	n, err := io.Copy(w, io.LimitReader(res.Body, sandboxwire.MaxSnapshotBytes+1))
	if err != nil {
		return fmt.Errorf("the download failed: %w", err)
	}
	if n > sandboxwire.MaxSnapshotBytes {
		return fmt.Errorf("it is larger than %d bytes", int64(sandboxwire.MaxSnapshotBytes))
	}
	return nil
}

// writeEnvFiles writes the configuration's env files from the values
// persisted for it: dotenv, mode 0600, inside the workspace only, given to
// the tools' user. A required key without a value is a warning; events and
// warnings name keys, never values.
func (p *provisioner) writeEnvFiles(ctx context.Context, files []sandboxwire.SavedEnvFile) {
	ev := sandboxwire.WorkspaceEnvFiles{Files: make([]sandboxwire.EnvFileKeys, 0, len(files))}
	for _, f := range files {
		keys := make([]string, 0, len(f.Keys))
		for _, k := range f.Keys {
			keys = append(keys, k.Key)
		}
		ev.Files = append(ev.Files, sandboxwire.EnvFileKeys{Path: f.Path, Keys: keys})
	}
	p.emit(ctx, ev)
	root, err := os.OpenRoot(p.o.Dir)
	if err != nil {
		p.warn(ctx, "env_files", fmt.Sprintf("the env files were not written: %v", err))
		return
	}
	defer func() { _ = root.Close() }()
	for _, f := range files {
		var missing []string
		var b strings.Builder
		b.WriteString("# Written by Remote Agents from the values saved for this configuration.\n")
		for _, k := range f.Keys {
			v, ok := p.o.Values[k.Key]
			if !ok {
				if k.Required {
					missing = append(missing, k.Key)
				}
				continue
			}
			fmt.Fprintf(&b, "%s=%s\n", k.Key, dotenvValue(v))
		}
		if err := writeInside(root, f, b.String(), p.o.User); err != nil {
			p.warn(ctx, "env_files", fmt.Sprintf("the env file %s was not written: %v", f.Path, err))
			continue
		}
		if len(missing) > 0 {
			p.warn(ctx, "env_files", fmt.Sprintf("the env file %s lacks required key(s) %s: no value was saved for this configuration", f.Path, strings.Join(missing, ", ")))
		}
	}
}

// writeInside writes one env file atomically, through root: a link at its
// path is replaced, never followed.
func writeInside(root *os.Root, f sandboxwire.SavedEnvFile, content string, user *toolenv.User) error {
	rel, ok := sandboxwire.WorkspacePath(".", f.Path)
	if !ok || rel == "." || !sandboxwire.ValidUploadPath(rel) {
		return errors.New("its path is not a relative path inside the workspace")
	}
	if f.Format != sandboxwire.EnvFormatDotenv {
		return fmt.Errorf("its format %q is not dotenv", f.Format)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := rel + ".ra-tmp"
	_ = root.Remove(tmp)
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = out.WriteString(content)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if c := user.Credential(); c != nil {
			err = root.Lchown(tmp, int(c.Uid), int(c.Gid))
		}
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

var bareValue = regexp.MustCompile(`^[A-Za-z0-9_./:@%+,=-]*$`)

// dotenvValue quotes a value for a dotenv file: bare when it is plain,
// else in double quotes with \, ", $ and line breaks escaped.
func dotenvValue(v string) string {
	if bareValue.MatchString(v) {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "\n", `\n`, "\r", `\r`)
	return `"` + r.Replace(v) + `"`
}

// Services are the service commands provisioning started: each a process
// group of the tools' user, its output in ServiceLog. Stop ends them.
type Services struct {
	mu     sync.Mutex
	groups []int
}

// Stop sends SIGTERM to every service's process group.
func (s *Services) Stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pgid := range s.groups {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	s.groups = nil
}

func (s *Services) add(pgid int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, pgid)
}

// ServiceLog is where, under the workspace, the output of service name goes.
func ServiceLog(name string) string {
	return path.Join(privateDir, "services", serviceFileName(name)+".log")
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func serviceFileName(name string) string {
	n := unsafeName.ReplaceAllString(name, "_")
	if strings.HasPrefix(n, ".") || n == "" {
		n = "_" + n
	}
	return n
}

// startServices starts each service command in its folder of the
// workspace, in the background, as the tools' user with their environment;
// inside tmux each gets a window named after it that shows its output. A
// service that cannot start is a warning.
func (p *provisioner) startServices(ctx context.Context, services []sandboxwire.SavedService) {
	shown := make([]sandboxwire.SavedService, len(services))
	for i, s := range services {
		shown[i] = sandboxwire.SavedService{Name: s.Name, Command: p.o.Secrets.String(s.Command), Cwd: s.Cwd}
	}
	p.begin(ctx, sandboxwire.WorkspaceServices{Services: shown})
	for _, s := range services {
		if err := p.startService(s); err != nil {
			p.warn(ctx, "services", fmt.Sprintf("the service %s (%s) did not start: %v", s.Name, s.Command, err))
		}
	}
}

func (p *provisioner) startService(s sandboxwire.SavedService) error {
	cwd, ok := sandboxwire.WorkspacePath(".", s.Cwd)
	if !ok {
		return errors.New("its folder is outside the workspace")
	}
	dir := filepath.Join(p.o.Dir, filepath.FromSlash(cwd))
	// The folder must be a folder of the workspace, not a link out of it.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("its folder %s does not exist", cwd)
	}
	if base, err := filepath.EvalSymlinks(p.o.Dir); err != nil || !inside(base, real) {
		return fmt.Errorf("its folder %s is outside the workspace", cwd)
	}
	logRel := ServiceLog(s.Name)
	logPath := filepath.Join(p.o.Dir, filepath.FromSlash(logRel))
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	_ = p.o.User.Own(filepath.Join(p.o.Dir, privateDir))
	_ = p.o.User.Own(filepath.Dir(logPath))
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("its log: %w", err)
	}
	defer func() { _ = out.Close() }()
	_ = p.o.User.Own(logPath)
	cmd := exec.Command("bash", "-c", s.Command)
	cmd.Dir = real
	env := p.o.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.o.User.Credential()}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("could not run: %w", err)
	}
	p.o.Services.add(cmd.Process.Pid)
	go func() { _ = cmd.Wait() }()
	if p.o.Tmux != "" {
		p.window(s.Name, logPath)
	}
	return nil
}

// window opens a tmux window named after the service, in the agent's tmux
// session, that follows its output. The service itself never runs in the
// tmux server, which is the agent's (root's in the image).
func (p *provisioner) window(name, logPath string) {
	id, err := exec.Command("tmux", "-L", p.o.Tmux, "new-window", "-d", "-P", "-F", "#{window_id}", "-t", "="+p.o.Tmux+":",
		"-n", name, "--", "tail", "-n", "+1", "-F", logPath).Output()
	if err != nil {
		p.o.Log.Warn("tmux window for a service", "service", name, "error", err.Error())
		return
	}
	// The window closes with its program: only the agent's own pane is kept
	// when it dies (for its exit status).
	_ = exec.Command("tmux", "-L", p.o.Tmux, "set-option", "-w", "-t", strings.TrimSpace(string(id)), "remain-on-exit", "off").Run()
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
