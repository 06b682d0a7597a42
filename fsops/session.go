package fsops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SessionFiles are the files of a session directory.
type SessionFiles struct {
	Dir         string // home/UID/agent/AGENT/session/SESSION, or shared/SPACE/agent/AGENT/session/SESSION
	Events      string // events.jsonl
	TerminalDir string // terminal/
	// DirMode and FileMode are the modes of the session's directories and
	// files: private (0700, 0600) under a home, group-readable (0750,
	// 0640) in a shared space.
	DirMode, FileMode os.FileMode
}

// SessionPlace is where an agent's sessions live: the directory holding
// session/ (with session/index/), and how they are shared.
type SessionPlace struct {
	Base  string // home/UID/agent/AGENT, or shared/SPACE/agent/AGENT
	Scope string // "private", or "shared:SPACE"; recorded in meta.json
	// space is set for a shared place: shared/SPACE must already be a real
	// directory, and shared/SPACE/agent/ is made for every member.
	space             string
	dirMode, fileMode os.FileMode
	// eventsMode is events.jsonl's: readable by the agent's own uid in a
	// private place (the sandbox shows an agent its sessions), by the
	// space's group in a shared one.
	eventsMode os.FileMode
}

// PrivateSessions is the place of an agent's own sessions, in the home of
// the uid it runs as: home/UID/agent/AGENT/session/.
func (r Root) PrivateSessions(uid int, agent string) SessionPlace {
	return SessionPlace{Base: r.AgentHome(uid, agent), Scope: "private", dirMode: 0o700, fileMode: 0o600, eventsMode: 0o644}
}

// SharedSessions is the place of an agent's sessions in shared space
// SPACE: shared/SPACE/agent/AGENT/session/ (seed, "Shared sessions are
// ordinary directories"). They are readable by the space's group, whose
// members may see them; only the run host that wrote them can change
// them.
func (r Root) SharedSessions(space, agent string) SessionPlace {
	return SessionPlace{Base: filepath.Join(r.SharedDir(space), "agent", agent), Scope: "shared:" + space,
		space: r.SharedDir(space), dirMode: 0o750, fileMode: 0o640, eventsMode: 0o640}
}

// EnsureSessionAt creates (or reuses) session dir of agent at place:
// events.jsonl, state, cwd, workspace, created_at (once), updated_at,
// meta.json and terminal/, and makes it the index's current session. Every
// file write is atomic; nothing is ever truncated or deleted, and nothing
// is followed through a symlink.
func (r Root) EnsureSessionAt(place SessionPlace, agent, session, cwd, workspace string) (SessionFiles, error) {
	dir := filepath.Join(place.Base, "session", session)
	f := SessionFiles{Dir: dir, Events: filepath.Join(dir, "events.jsonl"), TerminalDir: filepath.Join(dir, "terminal"),
		DirMode: place.dirMode, FileMode: place.fileMode}
	if place.space != "" {
		if err := place.makeSharedBase(); err != nil {
			return f, err
		}
	}
	for _, d := range []string{filepath.Dir(dir), dir, f.TerminalDir, filepath.Join(filepath.Dir(dir), "index")} {
		if err := MkdirNoFollow(d, place.dirMode); err != nil {
			return f, err
		}
	}
	now := strconv.FormatInt(time.Now().Unix(), 10) + "\n"
	if _, err := os.Lstat(filepath.Join(dir, "created_at")); errors.Is(err, fs.ErrNotExist) {
		if err := WriteAtomic(filepath.Join(dir, "created_at"), []byte(now), place.fileMode); err != nil {
			return f, err
		}
	}
	meta, _ := json.Marshal(map[string]string{"agent": agent, "session": session, "scope": place.Scope, "client": "ctx"})
	// Durable facts are rewritten only when they change; live state (state,
	// updated_at) is replaced atomically without fsync: a crash leaves it
	// stale, which readers see from the processes themselves.
	for name, v := range map[string]string{"cwd": cwd + "\n", "workspace": workspace + "\n", "meta.json": string(meta) + "\n"} {
		p := filepath.Join(dir, name)
		if old, err := ReadControl(p); err == nil && string(old) == v {
			continue
		}
		if err := WriteAtomic(p, []byte(v), place.fileMode); err != nil {
			return f, err
		}
	}
	for name, v := range map[string]string{"state": "active\n", "updated_at": now} {
		if err := WriteVolatile(filepath.Join(dir, name), []byte(v), place.fileMode); err != nil {
			return f, err
		}
	}
	if err := appendCreate(f.Events, place.eventsMode); err != nil { // create it, empty, if missing
		return f, err
	}
	return f, place.setCurrent(session)
}

// makeSharedBase makes shared/SPACE/agent/AGENT under an existing space.
// The space itself must be a real directory (never made here: creating a
// space is ctx shared new's, which makes agent/ for every member, group
// writable; it is made the same way when missing). AGENT's directory must
// be the run host's own: one another member made first could be changed
// under the run host's feet, so it is refused.
func (p SessionPlace) makeSharedBase() error {
	st, err := os.Lstat(p.space)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &os.PathError{Op: "open", Path: p.space, Err: notRegular(st.Mode())}
	}
	agents := filepath.Dir(p.Base)
	if _, err := os.Lstat(agents); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(agents, 0o770); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Mkdir applies the umask; chmod must repeat the setgid bit the
		// directory inherited from the space, or it would drop it.
		mode := os.FileMode(0o770) | st.Mode()&os.ModeSetgid
		if err := os.Chmod(agents, mode); err != nil {
			return err
		}
	}
	if err := MkdirNoFollow(agents, 0o770); err != nil { // refuses a symlink or a file
		return err
	}
	if err := MkdirNoFollow(p.Base, p.dirMode); err != nil {
		return err
	}
	bst, err := os.Lstat(p.Base)
	if err != nil {
		return err
	}
	if owner := int(bst.Sys().(*syscall.Stat_t).Uid); owner != os.Geteuid() {
		return fmt.Errorf("%s: owned by uid %d, not by uid %d, the run host writing the session", p.Base, owner, os.Geteuid())
	}
	return nil
}

// appendCreate creates path empty with mode if it is missing (never
// following a symlink), and leaves an existing regular file as it is.
func appendCreate(path string, mode os.FileMode) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(mode))
		if err != nil && err != syscall.EEXIST {
			return &os.PathError{Op: "create", Path: path, Err: err}
		}
		if err == nil {
			syscall.Close(fd)
			// The umask narrows the mode given to open.
			if err := os.Chmod(path, mode); err != nil {
				return err
			}
		}
	}
	return AppendLine(path, nil)
}

// setCurrent writes session/index/current and moves session to the
// front of session/index/list.
func (p SessionPlace) setCurrent(session string) error {
	index := filepath.Join(p.Base, "session", "index")
	current := filepath.Join(index, "current")
	if old, err := ReadControl(current); err == nil && string(old) == session+"\n" {
		return nil // already current, and so already first in the list
	}
	if err := WriteAtomic(current, []byte(session+"\n"), p.fileMode); err != nil {
		return err
	}
	list := []string{session}
	if b, err := ReadControl(filepath.Join(index, "list")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" && l != session {
				list = append(list, l)
			}
		}
	}
	return WriteAtomic(filepath.Join(index, "list"), []byte(strings.Join(list, "\n")+"\n"), p.fileMode)
}

// CurrentSession reads session/index/current of an agent; "" when absent
// or unreadable.
func (r Root) CurrentSession(uid int, agent string) string {
	return r.PrivateSessions(uid, agent).Current()
}

// Current reads session/index/current at the place; "" when absent or
// unreadable.
func (p SessionPlace) Current() string {
	b, err := ReadControl(filepath.Join(p.Base, "session", "index", "current"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SessionDir is the directory of session at the place.
func (p SessionPlace) SessionDir(session string) string {
	return filepath.Join(p.Base, "session", session)
}

// AgentHomeDirs are the directories of an agent's home the agent itself
// writes (its chroot environment, data, cache, log); session/ belongs to
// the run host.
var AgentHomeDirs = []string{"root", "data", "cache", "log"}

// EnsureAgentHome creates home/UID/agent/NAME and its subdirectories when
// missing (an agent whose uid was changed with ctx set starts with a fresh
// home) and, when chown is set (a root caller running the agent as its own
// uid), gives the home and the directories the agent writes to uid:gid.
// Nothing is followed through a symlink, and nothing another uid made is
// adopted (a *ForeignError): home/ is sticky and world-writable in a root
// tree, so another user may have made home/UID first, with a root/bin/sh
// of theirs for the agent to run. It is checked before anything is made
// and again after, when what a racing user made in between is in place.
func (r Root) EnsureAgentHome(uid, gid int, name string, chown bool) (string, error) {
	home := r.AgentHome(uid, name)
	if err := r.CheckAgentHome(uid, name); err != nil {
		return home, err
	}
	for _, d := range []string{r.Home(uid), filepath.Dir(home), home, filepath.Join(home, "session")} {
		if err := MkdirNoFollow(d, 0o700); err != nil {
			return home, err
		}
	}
	own := []string{home}
	for _, sub := range AgentHomeDirs {
		d := filepath.Join(home, sub)
		if err := MkdirNoFollow(d, 0o700); err != nil {
			return home, err
		}
		own = append(own, d)
	}
	if err := r.CheckAgentHome(uid, name); err != nil {
		return home, err
	}
	if !chown {
		return home, nil
	}
	// The agent runs as uid: it must pass through home/UID and
	// home/UID/agent to its home when no mount puts it there (iso
	// landlock). Traverse only: it lists neither.
	for _, d := range []string{r.Home(uid), filepath.Dir(home)} {
		if err := os.Chmod(d, 0o711); err != nil {
			return home, err
		}
	}
	for _, d := range own {
		if err := os.Lchown(d, uid, gid); err != nil {
			return home, err
		}
	}
	return home, nil
}

// MkdirNoFollow creates dir with mode when missing and refuses a symlink
// (or anything but a directory) in its place.
func MkdirNoFollow(dir string, mode os.FileMode) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return os.Chmod(dir, mode)
	}
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return &os.PathError{Op: "mkdir", Path: dir, Err: ErrSymlink}
	}
	if !st.IsDir() {
		return &os.PathError{Op: "mkdir", Path: dir, Err: notRegular(st.Mode())}
	}
	return nil
}

// RuntimeDir is where a user's live run state lives (terminal sockets, the
// files shown at /mnt/proc): the first of /run/user/UID/cortexfs (when
// /run/user/UID exists), /run/cortexfs/UID, $TMPDIR/cortexfs-UID and
// /tmp/cortexfs-UID that can be made a 0700 directory owned by uid. A
// /run/cortexfs made here is sticky and world-writable, like /tmp, so every
// user can have a directory in it and none can touch another's; a name
// squatted by another user is skipped. None of these is required: a minimal
// root without /run/user, /run or /tmp works with TMPDIR set, and where none
// can be used the one-line error names every place tried and both fixes.
func RuntimeDir(uid int) (string, error) {
	candidates := []string{}
	if st, err := os.Stat(filepath.Join("/run/user", strconv.Itoa(uid))); err == nil && st.IsDir() {
		candidates = append(candidates, filepath.Join("/run/user", strconv.Itoa(uid), "cortexfs"))
	}
	candidates = append(candidates, filepath.Join("/run/cortexfs", strconv.Itoa(uid)))
	candidates = appendTempCandidates(candidates, "cortexfs-"+strconv.Itoa(uid))
	if _, err := os.Lstat("/run/cortexfs"); errors.Is(err, fs.ErrNotExist) {
		if os.Mkdir("/run/cortexfs", 0o755) == nil {
			os.Chmod("/run/cortexfs", 0o777|os.ModeSticky)
		}
	}
	var tried []string
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Dir(c)); err != nil {
			tried = append(tried, triedLine(c, err))
			continue
		}
		if err := MkdirNoFollow(c, 0o700); err != nil {
			tried = append(tried, triedLine(c, err))
			continue
		}
		st, err := os.Lstat(c)
		if err == nil && int(st.Sys().(*syscall.Stat_t).Uid) == uid {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("owned by uid %d", st.Sys().(*syscall.Stat_t).Uid)
		}
		tried = append(tried, triedLine(c, err))
	}
	return "", noPlaceError("run state", uid, tried)
}

// appendTempCandidates adds DIR/name for $TMPDIR (when set) and /tmp, once
// each.
func appendTempCandidates(candidates []string, name string) []string {
	if t := os.Getenv("TMPDIR"); t != "" && filepath.Clean(t) != "/tmp" {
		candidates = append(candidates, filepath.Join(t, name))
	}
	return append(candidates, filepath.Join("/tmp", name))
}

// triedLine is one place a runtime directory could not be made, for the
// error: the path and the reason without repeating the path.
func triedLine(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if pe.Path == path {
			return path + ": " + pe.Err.Error()
		}
		return path + ": " + pe.Path + ": " + pe.Err.Error()
	}
	return path + ": " + err.Error()
}

// noPlaceError is the one-line error when no candidate directory works: it
// names each place tried and why, and the two fixes (a TMPDIR, or a /tmp).
func noPlaceError(what string, uid int, tried []string) error {
	tmpdir := "TMPDIR is not set"
	if t := os.Getenv("TMPDIR"); t != "" {
		tmpdir = "TMPDIR is " + t
	}
	return fmt.Errorf("no place for uid %d's %s (%s): %s; set TMPDIR to a directory uid %d can write, or create /tmp (mkdir -m 1777 /tmp)",
		uid, what, tmpdir, strings.Join(tried, "; "), uid)
}

// runBase is /run; a variable only so that tests can lay the terminal
// directories out in a temporary directory.
var runBase = "/run"

// TerminalDir returns the directory of uid's terminal sockets, made if
// missing, at the paths the seed and DESIGN §8 name:
// /run/user/UID/cortexfs/terminal when /run/user/UID exists, else
// /run/cortexfs/terminal/UID (the seed's path for installations without a
// per-user runtime directory). Where neither can be used (no writable
// /run, a name another user holds) it falls back to
// $TMPDIR/cortexfs-UID/terminal, then /tmp/cortexfs-UID/terminal. The
// directory itself is 0700 and owned by uid; every directory that leads to
// it must be owned by root or uid and, when others may write it, sticky
// (the rule the socket's own directory is held to), so no other user can
// swap a path component.
func TerminalDir(uid int) (string, error) {
	id := strconv.Itoa(uid)
	var candidates [][]string // each: a trusted existing parent, then the components to make under it
	if st, err := os.Stat(filepath.Join(runBase, "user", id)); err == nil && st.IsDir() {
		candidates = append(candidates, []string{filepath.Join(runBase, "user", id), "cortexfs", "terminal"})
	}
	candidates = append(candidates, []string{runBase, "cortexfs/", "terminal/", id})
	for _, t := range appendTempCandidates(nil, "cortexfs-"+id) {
		candidates = append(candidates, []string{filepath.Dir(t), filepath.Base(t), "terminal"})
	}
	var tried []string
	for _, c := range candidates {
		dir, err := makeTerminalDir(c[0], c[1:], uid)
		if err == nil {
			return dir, nil
		}
		where := c[0]
		for _, part := range c[1:] {
			where = filepath.Join(where, strings.TrimSuffix(part, "/"))
		}
		tried = append(tried, triedLine(where, err))
	}
	return "", noPlaceError("terminal sockets", uid, tried)
}

// makeTerminalDir makes each component under parent in turn. A component
// written "name/" is a directory shared by all users (/run/cortexfs and
// /run/cortexfs/terminal): made sticky and world-writable like /tmp, so
// each user can have a directory in it and none can touch another's; the
// others are private (0700). Each must end up owned by root or uid, and
// may be writable by others only when sticky.
func makeTerminalDir(parent string, components []string, uid int) (string, error) {
	if err := trustedDir(parent, uid); err != nil {
		return "", err
	}
	dir := parent
	for _, c := range components {
		name, shared := strings.CutSuffix(c, "/")
		dir = filepath.Join(dir, name)
		mode := os.FileMode(0o700)
		if shared {
			mode = 0o777 | os.ModeSticky
		}
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
			// Mkdir applies the umask and cannot set the sticky bit.
			if err := os.Chmod(dir, mode); err != nil {
				return "", err
			}
		}
		if err := trustedDir(dir, uid); err != nil {
			return "", err
		}
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if int(st.Sys().(*syscall.Stat_t).Uid) != uid || st.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("%s: owned by uid %d with mode %04o, not uid %d's private (0700) directory",
			dir, st.Sys().(*syscall.Stat_t).Uid, st.Mode().Perm(), uid)
	}
	return dir, nil
}

// trustedDir checks that dir is a real directory (not a symlink) owned by
// root or uid, and writable by others only if it is sticky.
func trustedDir(dir string, uid int) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return &os.PathError{Op: "lstat", Path: dir, Err: ErrSymlink}
	}
	if !st.IsDir() {
		return &os.PathError{Op: "lstat", Path: dir, Err: syscall.ENOTDIR}
	}
	owner := int(st.Sys().(*syscall.Stat_t).Uid)
	if owner != 0 && owner != uid {
		return fmt.Errorf("%s: owned by uid %d, not by root or uid %d", dir, owner, uid)
	}
	if st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("%s: writable by others (mode %04o) and not sticky", dir, st.Mode().Perm())
	}
	return nil
}

// TerminalSocketPath is the socket of agent's session terminal of the
// tree whose RuntimeKey is tree, in dir (a TerminalDir):
// DIR/TREE/AGENT/SESSION/main.sock. A path too long for a socket address
// is bound and dialled through its directory (SocketAddress).
func TerminalSocketPath(dir, tree, agent, session string) string {
	return filepath.Join(dir, tree, agent, session, "main.sock")
}
