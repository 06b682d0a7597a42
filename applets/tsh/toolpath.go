package tsh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ctx/fsops"
	"ctx/policy"
)

// ToolPath returns the directories tsh searches for tools, in order.
//
// Inside an agent context the runtime's process CTX_PATH is authoritative
// (it is derived from policy, mounts and identity); when it is unset the
// default is used and the user's .tshrc is never read.
//
// A standalone tsh takes, in this order:
//
//  1. the CTX_PATH= line of CTX_HOME/.tshrc, when that file exists;
//  2. the process CTX_PATH, when set and non-empty;
//  3. the default ROOT/tool:ROOT/home/UID/tool.
//
// CTX_HOME defaults to ROOT/home/UID, UID being the effective uid. The
// process CTX_PATH is split by fsops.SplitToolPath (empty and relative
// components dropped) and used as given; only .tshrc components are
// re-rooted and restricted to tool tiers (policy.ParseTshrc). An invalid
// .tshrc is an error, not a reason to fall back.
func ToolPath(e *Env, root fsops.Root) ([]string, error) {
	uid := os.Geteuid()
	if !agentContext(e) {
		dirs, err := readTshrc(e, root, uid)
		if err == nil {
			return dirs, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	dirs := root.DefaultToolPath(uid)
	if v := e.Getenv("CTX_PATH"); v != "" {
		dirs = fsops.SplitToolPath(v)
	}
	if !agentContext(e) {
		return dirs, nil
	}
	return trustedDirs(e, root, dirs), nil
}

// trustedDirs drops the tiers the tool-trust rule sets aside (DESIGN §16
// rule 8: a tool an agent could have planted never runs as an agent): their
// tools are not found at all, and lookup goes on with the next tier. When
// the agent context cannot be established the dirs stay as they are:
// authorizeExec then refuses every execution (agent-context).
func trustedDirs(e *Env, root fsops.Root, dirs []string) []string {
	c, err := caller(e, root)
	if err != nil {
		return dirs
	}
	return c.TrustedDirs(dirs).Dirs
}

// readTshrc reads and parses CTX_HOME/.tshrc. It returns an error wrapping
// fs.ErrNotExist when there is no such file (or no CTX_HOME directory).
//
// Neither the file nor CTX_HOME itself may be a symlink: the file is opened
// O_NOFOLLOW and CTX_HOME is checked with lstat first. Directories above
// CTX_HOME (the root, home/) are the administrator's and may be symlinks,
// as /ctx itself often is. The lstat-then-open pair can race only with
// someone who can rename CTX_HOME, which is the owner of home/, and the
// file configures nothing but the caller's own lookup.
func readTshrc(e *Env, root fsops.Root, uid int) ([]string, error) {
	home := e.Getenv("CTX_HOME")
	if home == "" {
		home = root.Home(uid)
	} else if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("CTX_HOME %q is not an absolute path", home)
	}
	home = filepath.Clean(home)
	st, err := os.Lstat(home)
	switch {
	case err != nil:
		return nil, err
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("CTX_HOME %s is a symlink (not followed); .tshrc not read", home)
	case !st.IsDir():
		return nil, fmt.Errorf("CTX_HOME %s is not a directory", home)
	}
	path := filepath.Join(home, ".tshrc")
	b, err := fsops.ReadControl(path)
	if err != nil {
		return nil, err
	}
	dirs, err := policy.ParseTshrc(b, policy.TshrcScope{Root: root.Dir, UID: uid, Home: home})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return dirs, nil
}
