package toolenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// User is who an agent's commands run as when the agent runs as root and
// RA_TOOL_USER names another user: they then cannot read the agent's process
// (its environment, its memory), signal it, or reach its tmux server, which
// are root's. Files the agent writes for the model (the file tools', the
// user's attachments, the env file) are given to this user, so that its
// commands can work on them.
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
	Home     string
}

// LookupUser returns the user named, by name or numeric id, for commands run
// in workspace; a numeric id /etc/passwd does not list is that id and the
// group of the same number. It fails unless this process runs as root: only root can
// run commands as another user, and a sandbox configured for it must not
// quietly run them as itself.
func LookupUser(spec, workspace string) (*User, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("tool user %s: the agent must run as root to run its tools as another user", spec)
	}
	u, err := user.Lookup(spec)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		u, err = user.LookupId(spec)
	}
	var unknownID user.UnknownUserIdError
	if id, perr := strconv.ParseUint(spec, 10, 32); errors.As(err, &unknownID) && perr == nil && id != 0 {
		// A numeric id the image does not list (a base image has no agent
		// user): that id, in the group of the same number, at home in the
		// workspace.
		u, err = &user.User{Uid: spec, Gid: spec, Username: spec, HomeDir: workspace}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tool user %s: %w", spec, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("tool user %s: %w", spec, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("tool user %s is root", spec)
	}
	out := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if groups, err := u.GroupIds(); err == nil {
		for _, g := range groups {
			if id, err := strconv.ParseUint(g, 10, 32); err == nil {
				out.Groups = append(out.Groups, uint32(id))
			}
		}
	}
	if info, err := os.Stat(out.Home); err != nil || !info.IsDir() {
		out.Home = workspace // a user without a home (nobody) works at home in the workspace
	}
	return out, nil
}

// Credential is what a command started as u runs with (exec.Cmd's
// SysProcAttr.Credential); nil for the nil *User, the agent's own user.
func (u *User) Credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// Own gives path (not a link's target) to u; the nil *User does nothing.
func (u *User) Own(path string) error {
	if u == nil {
		return nil
	}
	if err := os.Lchown(path, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("give %s to the tool user: %w", filepath.Base(path), err)
	}
	return nil
}

// OwnTree gives root and everything under it (links themselves, never their
// targets) to u, except the entries skip names (workspace-relative paths).
func (u *User) OwnTree(root string, skip ...string) error {
	if u == nil {
		return nil
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(root, path); err == nil && slices.Contains(skip, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return u.Own(path)
	})
}

// OwnCreated gives to u path and the folders above it, up to (not including)
// the first of them that existed before: existed is that folder, as
// FirstExisting returned it before path was created.
func (u *User) OwnCreated(existed, path string) error {
	if u == nil {
		return nil
	}
	for p := path; p != existed && len(p) > len(existed); p = filepath.Dir(p) {
		if err := u.Own(p); err != nil {
			return err
		}
	}
	return nil
}

// FirstExisting returns path or the nearest folder above it that exists.
func FirstExisting(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || filepath.Dir(p) == p {
			return p
		}
	}
}
