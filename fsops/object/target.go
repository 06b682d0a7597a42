package object

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Target is where objects are installed: a source tree (on disk the /ctx
// tree itself) and a tier. The user tier is <source>/home/<uid>/<class>,
// the system tier <source>/<class>.
type Target struct {
	Source string
	Tier   string // "user" or "system"
	UID    int    // the effective uid, for the user tier
}

func (t Target) check() error {
	if t.Tier != "user" && t.Tier != "system" {
		return invalidf("tier %q is not user or system", t.Tier)
	}
	if t.Source == "" {
		return invalidf("empty source")
	}
	return nil
}

// classRel is the class directory relative to the source.
func (t Target) classRel(class string) string {
	if t.Tier == "system" {
		return class
	}
	return filepath.Join("home", strconv.Itoa(t.UID), class)
}

// ClassDir is the absolute class directory of class in this target.
func (t Target) ClassDir(class string) string { return filepath.Join(t.Source, t.classRel(class)) }

// openClassDir opens the class directory. The source itself may be reached
// through a symlink (it is the caller's choice); nothing below it may be.
func (t Target) openClassDir(class string) (int, error) {
	rel := t.classRel(class)
	path := t.ClassDir(class)
	sfd, err := unix.Open(t.Source, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unavailableErr(&os.PathError{Op: "open", Path: t.Source, Err: err}, "source tree")
	}
	defer unix.Close(sfd)
	fd, err := unix.Openat2(sfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if err == unix.ENOSYS {
		fd, err = openatNoFollowWalk(sfd, rel)
	}
	if err != nil {
		if err == unix.ELOOP || err == unix.EXDEV {
			return -1, unavailablef("class directory %s: a symlink in the path (not followed)", path)
		}
		return -1, unavailableErr(&os.PathError{Op: "open", Path: path, Err: err}, "class directory")
	}
	return fd, nil
}

// openatNoFollowWalk opens rel below dirfd one component at a time with
// O_NOFOLLOW, for kernels without openat2.
func openatNoFollowWalk(dirfd int, rel string) (int, error) {
	cur, err := unix.Dup(dirfd)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := unix.Openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// lstatAt stats name in dirfd without following a symlink.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// Installed describes a receipt-managed object.
type Installed struct {
	Receipt
	ClassDir string
}

// Describe is the line inspect, install and uninstall print after their
// verb: "tool/NAME tier=T schema=S [version=V requires-cortexfs=R]
// sha256=H executable=DEV:INO control=DEV:INO".
func (i *Installed) Describe() string {
	s := fmt.Sprintf("%s/%s tier=%s schema=%s", i.Class, i.Name, i.Tier, i.ObjectSchema)
	if i.ObjectSchema == SchemaV2 {
		s += fmt.Sprintf(" version=%s requires-cortexfs=%s", i.ObjectVersion, i.CortexFSRequirement)
	}
	return s + fmt.Sprintf(" sha256=%s executable=%s control=%s", i.Executable.SHA256, i.Executable.DevIno, i.Control)
}
