package object

import (
	"ctx/fsops"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// publishFault, when set (by tests only), is called before each publish
// step ("control", "executable") and fails the step with its error. It is
// how the rollback paths are exercised without a racing process.
var publishFault func(step string) error

const maxStageAttempts = 32

// stage is a hidden directory inside the class directory where an object is
// assembled before publication.
type stage struct {
	parent int
	name   string
	fd     int
	path   string
}

func newStage(parent int, parentPath, prefix string) (*stage, error) {
	for n := 0; n < maxStageAttempts; n++ {
		name := prefix + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(n)
		err := unix.Mkdirat(parent, name, 0o700)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, unavailableErr(&os.PathError{Op: "mkdir", Path: filepath.Join(parentPath, name), Err: err}, "stage")
		}
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
			return nil, unavailableErr(err, "stage %s", name)
		}
		return &stage{parent: parent, name: name, fd: fd, path: filepath.Join(parentPath, name)}, nil
	}
	return nil, unavailablef("no free stage name %s<pid>-N in %s after %d attempts", prefix, parentPath, maxStageAttempts)
}

// remove deletes the stage and whatever is left in it. The stage is a 0700
// directory this process created, so removing its contents touches nothing
// foreign; RemoveAll never follows symlinks.
func (s *stage) remove() {
	unix.Close(s.fd)
	_ = os.RemoveAll(s.path) // best effort: residue is visible and harmless
	_ = unix.Fsync(s.parent)
}

// writeFileAt creates name in dirfd (never replacing), writes data with
// mode perm and fsyncs it: the stage is the temporary, so the file is
// written in place (fsops.CreateAt) and published with its directory.
func writeFileAt(dirfd int, name string, data []byte, perm uint32) error {
	return fsops.CreateAt(dirfd, name, data, &fsops.WriteOpts{Mode: perm})
}

func mkdirAt(dirfd int, name string, perm uint32) (int, error) {
	if err := unix.Mkdirat(dirfd, name, perm); err != nil {
		return -1, &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// controlFiles are the files of a new control directory: the manifest's
// controls (a missing final newline added to non-empty values), the
// defaults the class implies, and the runtime files at their initial
// state.
func controlFiles(m *Manifest) map[string][]byte {
	files := map[string][]byte{}
	for k, v := range m.Controls {
		if v != "" && v[len(v)-1] != '\n' {
			v += "\n"
		}
		files[k] = []byte(v)
	}
	files["status"] = []byte("idle\n")
	files["log"] = nil
	switch m.Class {
	case "tool":
		files["name"] = []byte(m.Name + "\n")
	case "agent":
		files["pid"] = nil
		if _, ok := files["window"]; !ok {
			files["window"] = []byte("auto\n")
		}
		if _, ok := files["perm"]; !ok {
			files["perm"] = []byte("rwx\n")
		}
	}
	return files
}

// Install installs the object described by the manifest at manifestPath
// into t, new-object-only. See the package comment for the protocol.
func Install(manifestPath string, t Target) (*Installed, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	m, err := ReadManifest(manifestPath)
	if err != nil {
		return nil, err
	}
	if m.Class == "agent" && t.Tier == "user" {
		return nil, invalidf("agent/%s: agents install only with --tier system (a user-tier agent cannot carry its identity to the runtime)", m.Name)
	}
	art, err := OpenArtifact(m)
	if err != nil {
		return nil, err
	}
	defer art.Close()
	cfd, err := t.openClassDir(m.Class)
	if err != nil {
		return nil, err
	}
	defer unix.Close(cfd)
	classDir := t.ClassDir(m.Class)
	for _, n := range []string{m.Name, m.Name + ".d"} {
		_, err := lstatAt(cfd, n)
		if err == nil {
			return nil, unavailablef("%s/%s already exists in %s (objects are never replaced)", m.Class, m.Name, classDir)
		}
		if err != unix.ENOENT {
			return nil, unavailableErr(&os.PathError{Op: "lstat", Path: filepath.Join(classDir, n), Err: err}, "target")
		}
	}
	st, err := newStage(cfd, classDir, ".cortexfs-install-")
	if err != nil {
		return nil, err
	}
	defer st.remove()
	r, err := assemble(st, m, art, t)
	if err != nil {
		return nil, err
	}
	if err := publish(st, cfd, classDir, r); err != nil {
		return nil, err
	}
	return &Installed{Receipt: *r, ClassDir: classDir}, nil
}

// assemble writes control/ and executable into the stage and returns the
// receipt it recorded in control/. The executable is a hard link when
// linkSource finds a file to link (see there), else a copy.
func assemble(st *stage, m *Manifest, art *Artifact, t Target) (*Receipt, error) {
	tier := t.Tier
	fail := func(err error) (*Receipt, error) {
		return nil, unavailableErr(err, "staging %s/%s in %s", m.Class, m.Name, st.path)
	}
	ctl, err := mkdirAt(st.fd, "control", 0o755)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(ctl)
	for name, data := range controlFiles(m) {
		if err := writeFileAt(ctl, name, data, 0o644); err != nil {
			return fail(err)
		}
	}
	hooks, err := mkdirAt(ctl, "hooks", 0o755)
	if err != nil {
		return fail(err)
	}
	for _, d := range []string{"pre.d", "post.d"} {
		fd, err := mkdirAt(hooks, d, 0o755)
		if err == nil {
			err = unix.Fsync(fd)
			unix.Close(fd)
		}
		if err != nil {
			unix.Close(hooks)
			return fail(err)
		}
	}
	err = unix.Fsync(hooks)
	unix.Close(hooks)
	if err != nil {
		return fail(err)
	}

	est, sum, err := stageExecutable(st, m, art, t)
	if err != nil {
		return nil, err
	}
	var cst unix.Stat_t
	if err := unix.Fstat(ctl, &cst); err != nil {
		return fail(err)
	}
	r := &Receipt{Schema: ReceiptV1, ObjectSchema: m.Schema, Class: m.Class, Name: m.Name, Tier: tier}
	if m.Schema == SchemaV2 {
		r.Schema, r.ObjectVersion, r.CortexFSRequirement = ReceiptV2, m.Version, m.Requirement
	}
	r.Executable.DevIno, r.Executable.SHA256 = devIno(est), sum
	r.Control = devIno(&cst)
	if err := writeFileAt(ctl, ReceiptName, r.Encode(), 0o444); err != nil {
		return fail(err)
	}
	if err := unix.Fsync(ctl); err != nil {
		return fail(err)
	}
	if err := unix.Fsync(st.fd); err != nil {
		return fail(err)
	}
	return r, nil
}

// publish renames control then executable into the class directory without
// replacement, verifying each published inode, and rolls back on failure.
func publish(st *stage, cfd int, classDir string, r *Receipt) error {
	ctlName, exeName := r.Name+".d", r.Name
	step := func(name string) error {
		if publishFault != nil {
			return publishFault(name)
		}
		return nil
	}
	conflict := func(err error, what string) error {
		if err == unix.EEXIST {
			return unavailablef("%s/%s: %s appeared in %s while installing (objects are never replaced)", r.Class, r.Name, what, classDir)
		}
		return unavailableErr(err, "publishing %s/%s %s", r.Class, r.Name, what)
	}

	if err := step("control"); err != nil {
		return conflict(err, "control directory")
	}
	if err := fsops.RenameNoReplaceAt(st.fd, "control", cfd, ctlName); err != nil {
		return conflict(err, "control directory")
	}
	if err := verifyAt(cfd, ctlName, r.Control); err != nil {
		return rollback(st, cfd, classDir, r, false, unavailableErr(err, "publishing %s/%s control directory", r.Class, r.Name))
	}
	if err := step("executable"); err != nil {
		return rollback(st, cfd, classDir, r, false, conflict(err, "executable"))
	}
	if err := fsops.RenameNoReplaceAt(st.fd, "executable", cfd, exeName); err != nil {
		return rollback(st, cfd, classDir, r, false, conflict(err, "executable"))
	}
	if err := verifyAt(cfd, exeName, r.Executable.DevIno); err != nil {
		return rollback(st, cfd, classDir, r, true, unavailableErr(err, "publishing %s/%s executable", r.Class, r.Name))
	}
	if err := unix.Fsync(cfd); err != nil {
		return rollback(st, cfd, classDir, r, true, unavailableErr(err, "syncing %s", classDir))
	}
	return nil
}

// verifyAt checks that name in dirfd is the inode want.
func verifyAt(dirfd int, name string, want DevIno) error {
	st, err := lstatAt(dirfd, name)
	if err != nil {
		return err
	}
	if got := devIno(&st); got != want {
		return fmt.Errorf("%s is inode %s, expected %s (replaced while publishing)", name, got, want)
	}
	return nil
}

// rollback moves what was published back into the stage, but only inodes
// the receipt names: a foreign file that took the name is never touched.
func rollback(st *stage, cfd int, classDir string, r *Receipt, exePublished bool, cause error) error {
	var left []string
	if exePublished {
		if verifyAt(cfd, r.Name, r.Executable.DevIno) == nil {
			if err := fsops.RenameNoReplaceAt(cfd, r.Name, st.fd, "rolled-back-executable"); err != nil {
				left = append(left, r.Name)
			}
		}
	}
	if verifyAt(cfd, r.Name+".d", r.Control) == nil {
		if err := fsops.RenameNoReplaceAt(cfd, r.Name+".d", st.fd, "rolled-back-control"); err != nil {
			left = append(left, r.Name+".d")
		}
	}
	_ = unix.Fsync(cfd)
	if len(left) > 0 {
		return unavailablef("%v; rollback failed, still published in %s: %v", cause, classDir, left)
	}
	return cause
}
