package object

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// linkDisabled, when set (by tests only), makes install copy every
// executable, as it does where no hard link can be made.
var linkDisabled bool

// stageExecutable puts the object's executable into the stage as
// "executable" and returns its stat and SHA-256.
//
// An object whose executable is the ctx binary (the builtin-style tools and
// agents, and every MCP-projected tool, which runs as ctx under its own
// name) need not carry a copy of the binary: the executable becomes a hard link
// of, in this order,
//
//  1. the tree's own bin/ctx, when its bytes are the manifest's (the file
//     every builtin tool of the tree already links);
//  2. the artifact itself, for an MCP-projected tool (an `mcp` control),
//     whose artifact is the ctx binary that projected it.
//
// A link shares its inode, so a candidate is taken only when the link would
// pass the tool-trust rule as a copy would: a regular executable file owned
// by root or by the installing user, writable by no one else, neither
// setuid nor setgid, on the stage's file system. Where no candidate can be
// linked (another file system, fs.protected_hardlinks, no /proc) the
// executable is copied while hashed, mode 0755. Never a symlink: tool lookup
// never takes a symlink for a tool (ctx man ctx.tool), so a symlinked
// object would install and then not be found.
func stageExecutable(st *stage, m *Manifest, art *Artifact, t Target) (*unix.Stat_t, string, error) {
	if !linkDisabled {
		for _, open := range []func() (*os.File, error){
			func() (*os.File, error) { return openTreeCtx(t, art) },
			func() (*os.File, error) {
				if _, ok := m.Controls["mcp"]; !ok {
					return nil, os.ErrNotExist
				}
				return art.File, nil
			},
		} {
			f, err := open()
			if err != nil {
				continue
			}
			est, ok, err := linkStaged(st, f, m.SHA256)
			if f != art.File {
				f.Close()
			}
			if err != nil {
				return nil, "", err
			}
			if ok {
				return est, m.SHA256, nil
			}
		}
	}
	return copyStaged(st, m, art)
}

// openTreeCtx opens <source>/bin/ctx (no symlink below the source) when it
// is a regular file of the artifact's size; its digest is checked by
// linkStaged.
func openTreeCtx(t Target, art *Artifact) (*os.File, error) {
	sfd, err := unix.Open(t.Source, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sfd)
	fd, err := unix.Openat2(sfd, "bin/ctx", &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if err == unix.ENOSYS {
		var dfd int
		if dfd, err = openatNoFollowWalk(sfd, "bin"); err == nil {
			fd, err = unix.Openat(dfd, "ctx", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
			unix.Close(dfd)
		}
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "bin/ctx")
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG || fst.Size != art.Stat.Size {
		f.Close()
		return nil, os.ErrNotExist
	}
	return f, nil
}

// linkStaged hard-links the open file f into the stage as "executable" if it
// may be shared (see stageExecutable) and its bytes hash to sum. ok is false,
// with nothing left in the stage, when it may not or cannot be linked; err
// is set only for a failure that must stop the install.
func linkStaged(st *stage, f *os.File, sum string) (*unix.Stat_t, bool, error) {
	var fst, sst unix.Stat_t
	if unix.Fstat(int(f.Fd()), &fst) != nil || unix.Fstat(st.fd, &sst) != nil {
		return nil, false, nil
	}
	euid := uint32(os.Geteuid())
	switch {
	case fst.Mode&unix.S_IFMT != unix.S_IFREG, fst.Mode&0o111 == 0,
		fst.Uid != 0 && fst.Uid != euid,
		fst.Mode&0o022 != 0, fst.Mode&(unix.S_ISUID|unix.S_ISGID) != 0,
		fst.Dev != sst.Dev:
		return nil, false, nil
	}
	got, err := hashFile(io.NewSectionReader(f, 0, MaxArtifactSize+1), nil)
	if err != nil || got != sum {
		return nil, false, nil
	}
	// Linking the descriptor's inode (not a path) links exactly the file
	// just hashed: nothing can be swapped in between.
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, proc, st.fd, "executable", unix.AT_SYMLINK_FOLLOW); err != nil {
		return nil, false, nil
	}
	est, err := lstatAt(st.fd, "executable")
	if err != nil || devIno(&est) != devIno(&fst) {
		_ = unix.Unlinkat(st.fd, "executable", 0)
		return nil, false, unavailablef("staging executable in %s: the link is not the inode linked", st.path)
	}
	// Its bytes may still change through another name of the inode; the
	// digest is taken again now that the link exists, as a copy's is while
	// copying, and the receipt's check catches any later change.
	again, err := hashFile(io.NewSectionReader(f, 0, MaxArtifactSize+1), nil)
	if err != nil || again != sum {
		_ = unix.Unlinkat(st.fd, "executable", 0)
		return nil, false, invalidf("executable: sha256 changed while installing (manifest says %s)", sum)
	}
	return &est, true, nil
}

// copyStaged copies the artifact into the stage while hashing it.
func copyStaged(st *stage, m *Manifest, art *Artifact) (*unix.Stat_t, string, error) {
	fail := func(err error) (*unix.Stat_t, string, error) {
		return nil, "", unavailableErr(err, "staging %s/%s in %s", m.Class, m.Name, st.path)
	}
	efd, err := unix.Openat(st.fd, "executable", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o755)
	if err != nil {
		return fail(err)
	}
	exe := os.NewFile(uintptr(efd), "executable")
	defer exe.Close()
	sum, err := hashFile(art.File, exe)
	if err != nil {
		return fail(err)
	}
	if sum != m.SHA256 {
		// The artifact changed between the check and the copy.
		return nil, "", invalidf("executable %s: sha256 changed to %s while installing (manifest says %s)", m.ArtifactPath(), sum, m.SHA256)
	}
	if err := unix.Fchmod(efd, 0o755); err != nil {
		return fail(err)
	}
	if err := exe.Sync(); err != nil {
		return fail(err)
	}
	var est unix.Stat_t
	if err := unix.Fstat(efd, &est); err != nil {
		return fail(err)
	}
	return &est, sum, nil
}
