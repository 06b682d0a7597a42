package protectsearch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// A protected .git file leads to a git directory, which is protected too:
// where it is and whether the agent may see it at all is decided here,
// on what the host's files say, never on what a run could have written.

// gitFile follows a protected .git file (a linked worktree's or a
// submodule's) to its git directory, on the host, and protects that too:
// in place when it lies inside the workspace (a submodule of the
// workspace's repository), else, for a linked worktree, bound read-only
// where the file's path leads inside the sandbox, so git works there. An
// outside directory is shown only when it leads back to this workspace
// (the worktree's gitdir back-link names this .git file): a .git file
// written in an earlier run must not open an unrelated host directory to
// the agent. A submodule's git directory outside the workspace is not
// shown: git finds that submodule's work tree through its superproject's
// paths, which the sandbox does not have; start the agent in the
// superproject instead.
func (g *Search) gitFile(rel string) {
	host := filepath.Join(g.Workspace, rel)
	data, err := readSmallNoFollow(host)
	if err != nil {
		g.Notes = append(g.Notes, rel+": "+err.Error())
		return
	}
	written, err := policy.ParseGitFile(data)
	if err != nil {
		g.Notes = append(g.Notes, rel+": not a git file: "+err.Error())
		return
	}
	target, inSandbox := written, filepath.Clean(written)
	if !filepath.IsAbs(written) {
		target = filepath.Join(filepath.Dir(host), written)
		inSandbox = filepath.Join(sandboxplan.SandboxWorkspace, filepath.Dir(rel), written)
	}
	// Notes name the path as the file wrote it, never what it resolves
	// to, and say the same whether it exists or not: the file may be an
	// earlier run's, asking about the host.
	notShown := func(why string) {
		g.Notes = append(g.Notes, rel+": its git directory "+strconv.Quote(written)+" is not shown: "+why)
	}
	gitdir, err := filepath.EvalSymlinks(target)
	if err != nil {
		notShown(notBack)
		return
	}
	common := commonGitDir(gitdir)
	if r, ok := g.inside(gitdir); ok {
		g.addPath(r)
		if r, ok := g.inside(common); ok {
			g.addPath(r)
		}
		return
	}
	if g.Shared {
		// iso shared hides nothing: whatever the file leads to, if it is
		// a git directory, host git would run its hooks.
		if !isGitDir(common) {
			g.Notes = append(g.Notes, rel+": "+strconv.Quote(written)+" is not a git directory: nothing to protect there")
			return
		}
		g.addGitDir(sandboxplan.GitDirMount{Host: common, Sandbox: common})
		return
	}
	if !g.pointsBack(host, gitdir) {
		notShown(notBack)
		return
	}
	if g.NoMounts {
		// iso landlock: the git directory is read where the file leads,
		// on the host; a rule makes it readable, none writable.
		g.addGitDir(sandboxplan.GitDirMount{Host: common, Sandbox: common})
		return
	}
	m, err := g.worktreeMount(gitdir, common, inSandbox)
	if err != nil {
		notShown(err.Error())
		return
	}
	g.addGitDir(m)
	g.Worktrees = append(g.Worktrees, filepath.Join(sandboxplan.SandboxWorkspace, filepath.Dir(rel)))
}

// commonGitDir is the common directory of the git directory gitdir (a
// linked worktree's "commondir" file leads to it), or gitdir itself: the
// file is followed only to a directory that holds gitdir.
func commonGitDir(gitdir string) string {
	if real, err := gitPathFile(gitdir, "commondir"); err == nil && within(gitdir, real) {
		return real
	}
	return gitdir
}

// gitPathFile is where the path in gitdir's file name (commondir, gitdir)
// leads, absolute or relative to gitdir, symlinks resolved.
func gitPathFile(gitdir, name string) (string, error) {
	b, err := readSmallNoFollow(filepath.Join(gitdir, name))
	if err != nil {
		return "", err
	}
	p, err := policy.ParseGitPathFile(b)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(gitdir, p)
	}
	return filepath.EvalSymlinks(p)
}

// worktreeMount is the read-only mount that shows a linked worktree's git
// directory outside the workspace where its .git file leads inside the
// sandbox (inSandbox): the common directory, when the worktree's own lies
// inside it, at the place that makes the two paths agree. The error says
// why no such mount is allowed.
func (g *Search) worktreeMount(gitdir, common, inSandbox string) (sandboxplan.GitDirMount, error) {
	m := sandboxplan.GitDirMount{Host: gitdir, Sandbox: inSandbox}
	if common != gitdir {
		if _, ok := g.inside(common); !ok {
			// The common directory holds the worktree's objects and
			// refs; the worktree's own directory lies inside it.
			sub, _ := filepath.Rel(common, gitdir)
			base, ok := strings.CutSuffix(inSandbox, "/"+sub)
			if !ok {
				return m, errors.New("its common directory is not where its path leads")
			}
			m = sandboxplan.GitDirMount{Host: common, Sandbox: base}
		}
	}
	return m, sandboxplan.GitDirTargetAllowed(m.Sandbox)
}

// isGitDir reports whether dir looks like a git directory: HEAD, objects
// and refs, as git itself checks.
func isGitDir(dir string) bool {
	for _, n := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// notBack is why a .git file's git directory outside the workspace is not
// shown.
const notBack = "it does not lead back to this workspace (a submodule's is reached through its superproject: start the agent there)"

// inside returns p relative to the workspace when p lies in it.
func (g *Search) inside(p string) (string, bool) {
	if !within(p, g.Workspace) {
		return "", false
	}
	r, err := filepath.Rel(g.Workspace, p)
	return r, err == nil && r != "."
}

// pointsBack checks a worktree's back-link: the "gitdir" file of its git
// directory names the .git file at host (absolutely, or relative to the
// git directory).
func (g *Search) pointsBack(host, gitdir string) bool {
	real, err := gitPathFile(gitdir, "gitdir")
	return err == nil && real == host
}

// addGitDir records an outside directory to show, once.
func (g *Search) addGitDir(m sandboxplan.GitDirMount) {
	for _, d := range g.GitDirs {
		if d == m {
			return
		}
		if within(m.Sandbox, d.Sandbox) || within(d.Sandbox, m.Sandbox) {
			g.Notes = append(g.Notes, "git directory "+m.Host+" is not shown: "+m.Sandbox+" overlaps "+d.Sandbox)
			return
		}
	}
	g.GitDirs = append(g.GitDirs, m)
}

// readSmallNoFollow reads a small regular file without following a
// symlink in its last component.
func readSmallNoFollow(p string) ([]byte, error) {
	// Never open what is not a regular file (a FIFO would block, a device
	// could act); O_NOFOLLOW and the check after opening close the race.
	if st, err := os.Lstat(p); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return fsops.ReadLimited(f, p, 8192)
}
