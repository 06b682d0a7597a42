package queue

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// A shared space may live on a network or FUSE filesystem (NFSv4, CephFS,
// sshfs): that is how ctx scales out across hosts. Such filesystems do not
// all give what a local one does, so the queue learns, per directory, what
// it may rely on, and never falls back to a check-then-rename:
//
//   - renameat2(RENAME_NOREPLACE) is tried first; where it fails with
//     EINVAL the directory is probed (a scratch file renamed no-replace),
//     and only a probe that fails too turns the fallback on for that
//     directory: an EINVAL for any other reason stays an error;
//   - the fallback is link(2)+unlink(2): link fails on any existing entry,
//     atomically on the server. Where link fails, the target is looked up
//     (FUSE/SFTP report a lost link race as EPERM) and a probe decides
//     whether the filesystem has hard links at all; without them the queue
//     refuses, naming the filesystem and what it lacks.

// fsMagic names the filesystems the queue knows by their statfs magic.
var fsMagic = map[int64]struct {
	name   string
	remote bool
}{
	unix.TMPFS_MAGIC: {"tmpfs", false}, unix.EXT4_SUPER_MAGIC: {"ext4", false},
	unix.XFS_SUPER_MAGIC: {"xfs", false}, unix.BTRFS_SUPER_MAGIC: {"btrfs", false},
	unix.F2FS_SUPER_MAGIC: {"f2fs", false}, unix.OVERLAYFS_SUPER_MAGIC: {"overlay", false},
	unix.NFS_SUPER_MAGIC: {"nfs", true}, unix.CEPH_SUPER_MAGIC: {"ceph", true},
	unix.FUSE_SUPER_MAGIC: {"fuse", true}, unix.SMB_SUPER_MAGIC: {"smb", true},
	unix.SMB2_SUPER_MAGIC: {"smb2", true}, unix.CIFS_SUPER_MAGIC: {"cifs", true},
	unix.V9FS_MAGIC: {"9p", true}, unix.AFS_FS_MAGIC: {"afs", true},
}

// FSInfo is what the queue knows about the filesystem of a directory.
type FSInfo struct {
	Type    string // "tmpfs", "nfs4", "fuse.sshfs", ... (mountinfo's name where known)
	Remote  bool   // a network or FUSE filesystem: other hosts may share it
	Mount   string // its mount point, where mountinfo names it
	Options string // its mount options (and, for sshfs, the -o options it runs with)
	// Unsafe, when not empty, says why answers on this mount may be stale
	// across hosts and which mount options fix it.
	Unsafe string
}

// statFS describes the filesystem of fd. mountinfo is read only for a
// remote filesystem, so a local Open pays one fstatfs.
func statFS(fd int) FSInfo {
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil {
		return FSInfo{Type: "unknown"}
	}
	k, ok := fsMagic[int64(sfs.Type)]
	if !ok {
		return FSInfo{Type: "0x" + strconv.FormatInt(int64(sfs.Type), 16)}
	}
	info := FSInfo{Type: k.name, Remote: k.remote}
	if k.remote {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			info.Mount, info.Type, info.Options = mountOf(st.Dev, info.Type)
		}
		info.Unsafe = unsafeCache(info)
	}
	return info
}

// mountOf finds the mount of device dev in /proc/self/mountinfo and
// returns its mount point, type and options (per-mount and superblock).
func mountOf(dev uint64, typ string) (mount, fstype, opts string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", typ, ""
	}
	want := strconv.FormatUint(uint64(unix.Major(dev)), 10) + ":" + strconv.FormatUint(uint64(unix.Minor(dev)), 10)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || f[2] != want || sep < 0 || len(f) < sep+4 {
			continue
		}
		mount, fstype, opts = fsops.UnescapeMountinfo(f[4]), f[sep+1], f[5]+","+f[sep+3]
	}
	if fstype == "" {
		return "", typ, ""
	}
	if fstype == "fuse.sshfs" {
		opts += sshfsOptions(mount)
	}
	return mount, fstype, opts
}

// sshfsOptions returns ",OPTS" for the -o options of the sshfs process
// serving mount point mount, when it runs in this PID namespace: sshfs's
// cache settings live in that process, not in the kernel's mount table.
func sshfsOptions(mount string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasSuffix(args[0], "sshfs") || !slicesContains(args, mount) {
			continue
		}
		var opts []string
		for i := 1; i < len(args); i++ {
			switch a := args[i]; {
			case a == "-o" && i+1 < len(args):
				opts = append(opts, args[i+1])
				i++
			case strings.HasPrefix(a, "-o"):
				opts = append(opts, a[2:])
			}
		}
		return ",sshfs:" + strings.Join(opts, ",")
	}
	return ""
}

func randUint32() uint32 {
	var r [4]byte
	fsops.RandomBytes(r[:])
	return uint32(r[0]) | uint32(r[1])<<8 | uint32(r[2])<<16 | uint32(r[3])<<24
}

func slicesContains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// hasOpt reports whether the comma-separated opts hold any of want.
func hasOpt(opts string, want ...string) bool {
	for _, o := range strings.Split(opts, ",") {
		for _, w := range want {
			if o == w {
				return true
			}
		}
	}
	return false
}

// unsafeCache says why the caches of a remote mount make the queue's
// answers wrong across hosts (a new or removed entry invisible to another
// host's lookups for seconds), and which options make it safe; "" when
// the mount is known to be coherent.
func unsafeCache(info FSInfo) string {
	o := info.Options
	switch {
	case strings.HasPrefix(info.Type, "nfs"):
		if hasOpt(o, "lookupcache=none", "noac", "actimeo=0") {
			return ""
		}
		return "NFS caches lookups and attributes: mount with -o lookupcache=none (or actimeo=0)"
	case info.Type == "ceph":
		return "" // the kernel client's capabilities keep metadata coherent
	case info.Type == "fuse.sshfs":
		noCache := hasOpt(o, "cache=no", "dir_cache=no", "sshfs:cache=no", "sshfs:dir_cache=no")
		if noCache && hasOpt(o, "entry_timeout=0") && hasOpt(o, "attr_timeout=0") {
			return ""
		}
		return "sshfs caches directories and attributes: mount with -o dir_cache=no,entry_timeout=0,attr_timeout=0,negative_timeout=0 (sshfs 2: -o cache=no)"
	case strings.HasPrefix(info.Type, "fuse"):
		return "FUSE filesystems may cache entries and attributes: mount with entry_timeout=0,attr_timeout=0,negative_timeout=0 and no directory cache"
	case info.Type == "cifs" || strings.HasPrefix(info.Type, "smb"):
		if hasOpt(o, "actimeo=0") && hasOpt(o, "cache=none") {
			return ""
		}
		return "SMB caches attributes and data: mount with -o actimeo=0,cache=none"
	case info.Type == "9p":
		if hasOpt(o, "cache=none") {
			return ""
		}
		return "9p caches metadata: mount with -o cache=none"
	}
	return info.Type + " is a network filesystem whose cache coherence ctx cannot check"
}

// FS describes the filesystem the queue lives on (see FSInfo).
func (q *Queue) FS() FSInfo { return q.fs }

// FSWarning is a one-line warning for a queue on a remote filesystem whose
// caches can make answers stale across hosts, naming the options that fix
// it; "" when there is nothing to warn about.
func (q *Queue) FSWarning() string {
	if !q.fs.Remote || q.fs.Unsafe == "" {
		return ""
	}
	where := q.fs.Mount
	if where == "" {
		where = q.Dir
	}
	return fmt.Sprintf("shared space %s is on %s (%s): another host may see a stale queue; %s (ctx man ctx.shared, \"Across hosts\")",
		q.Space, q.fs.Type, where, q.fs.Unsafe)
}

// ErrNoPrimitive: the filesystem has no atomic create-without-replace.
var ErrNoPrimitive = errors.New("no atomic create-without-replace on this filesystem")

// dirCaps is what a probe found about one directory.
type dirCaps struct {
	probed    bool
	noReplace bool
	links     bool
	linkErr   error
}

// caps probes state directory d once: renameat2(RENAME_NOREPLACE) and
// link(2) of a scratch file. A directory we cannot write is reported as
// having both (the real operation will then fail with EACCES, which says
// more than a guess would).
func (q *Queue) caps(d int) *dirCaps {
	c := &q.dcaps[d]
	if c.probed {
		return c
	}
	c.probed, c.noReplace, c.links = true, true, true
	fd := q.fd[d]
	a := fmt.Sprintf(".ctx-probe-%d-%d", os.Getpid(), randUint32())
	f, err := unix.Openat(fd, a, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, FileMode)
	if err != nil {
		return c
	}
	unix.Close(f)
	defer unix.Unlinkat(fd, a, 0)
	b := a + "-b"
	switch err := unix.Renameat2(fd, a, fd, b, unix.RENAME_NOREPLACE); err {
	case nil:
		unix.Renameat(fd, b, fd, a)
	case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
		c.noReplace = false
	}
	if err := unix.Linkat(fd, a, fd, b, 0); err != nil {
		c.links, c.linkErr = false, err
	} else {
		unix.Unlinkat(fd, b, 0)
	}
	return c
}

// lacks is the refusal where a directory has neither primitive.
func (q *Queue) lacks(d int) error {
	c := q.caps(d)
	return fmt.Errorf("%w: %s is on %s, which supports neither renameat2(RENAME_NOREPLACE) nor hard links (link: %v); "+
		"ctx refuses rather than risk replacing a file (sshfs: the server must offer hardlink@openssh.com; see ctx man ctx.shared)",
		ErrNoPrimitive, q.dirPath(d), q.fs.Type, c.linkErr)
}

// CheckPrimitives probes every state directory and refuses a queue where
// one has neither RENAME_NOREPLACE nor hard links (shared new runs it, so
// such a space is refused when made, not at its first publish).
func (q *Queue) CheckPrimitives() error {
	for d := range q.fd {
		if c := q.caps(d); !c.noReplace && !c.links {
			return q.lacks(d)
		}
	}
	return nil
}
