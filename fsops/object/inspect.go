package object

import (
	"os"
	"path/filepath"

	"ctx/fsops"
	"ctx/policy"

	"golang.org/x/sys/unix"
)

// managed is an installed object opened and verified against its receipt.
type managed struct {
	Installed
	cfd int // class directory
}

func checkClassName(class, name string) error {
	if class != "tool" && class != "agent" {
		return invalidf("class %q is not tool or agent", class)
	}
	if err := policy.ValidName(name); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// Inspect verifies an installed object against its receipt and writes
// nothing: receipt identity (class, name, tier), the control directory's
// and the executable's inodes, the executable's type, execute bits and
// SHA-256, and that the executable did not change while it was hashed.
// Control contents are mutable and are not revalidated. An object without
// a receipt is unmanaged and reported unavailable, never adopted.
func Inspect(t Target, class, name string) (*Installed, error) {
	mo, err := open(t, class, name)
	if err != nil {
		return nil, err
	}
	unix.Close(mo.cfd)
	return &mo.Installed, nil
}

func open(t Target, class, name string) (*managed, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := checkClassName(class, name); err != nil {
		return nil, err
	}
	cfd, err := t.openClassDir(class)
	if err != nil {
		return nil, err
	}
	mo := &managed{cfd: cfd, Installed: Installed{ClassDir: t.ClassDir(class)}}
	if err := mo.verify(t, class, name); err != nil {
		unix.Close(cfd)
		return nil, err
	}
	return mo, nil
}

func (mo *managed) verify(t Target, class, name string) error {
	where := filepath.Join(mo.ClassDir, name)
	ctl, err := unix.Openat(mo.cfd, name+".d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return unavailablef("%s/%s is not installed in %s", class, name, mo.ClassDir)
		}
		return unavailableErr(&os.PathError{Op: "open", Path: where + ".d", Err: err}, "control directory")
	}
	defer unix.Close(ctl)
	var cst unix.Stat_t
	if err := unix.Fstat(ctl, &cst); err != nil {
		return unavailableErr(err, "control directory %s.d", where)
	}
	rfd, err := unix.Openat(ctl, ReceiptName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return unavailableErr(err, "%s/%s: no readable install receipt (unmanaged objects are never adopted)", class, name)
	}
	rf := os.NewFile(uintptr(rfd), ReceiptName)
	defer rf.Close()
	var rst unix.Stat_t
	if err := unix.Fstat(rfd, &rst); err != nil || rst.Mode&unix.S_IFMT != unix.S_IFREG || rst.Size > maxReceiptSize {
		return unavailablef("%s/%s: install receipt is not a regular file of at most %d bytes", class, name, maxReceiptSize)
	}
	data := make([]byte, rst.Size)
	if _, err := rf.ReadAt(data, 0); err != nil {
		return unavailableErr(err, "%s/%s: reading install receipt", class, name)
	}
	r, err := ParseReceipt(data)
	if err != nil {
		return unavailableErr(err, "%s/%s: invalid install receipt", class, name)
	}
	switch {
	case r.Class != class || r.Name != name:
		return unavailablef("%s/%s: receipt names %s/%s", class, name, r.Class, r.Name)
	case r.Tier != t.Tier:
		return unavailablef("%s/%s: receipt records tier %s, not %s", class, name, r.Tier, t.Tier)
	case devIno(&cst) != r.Control:
		return unavailablef("%s/%s: control directory is inode %s, receipt says %s", class, name, devIno(&cst), r.Control)
	}
	efd, err := unix.Openat(mo.cfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return unavailableErr(&os.PathError{Op: "open", Path: where, Err: err}, "%s/%s executable", class, name)
	}
	exe := os.NewFile(uintptr(efd), where)
	defer exe.Close()
	var before, after unix.Stat_t
	if err := unix.Fstat(efd, &before); err != nil {
		return unavailableErr(err, "%s", where)
	}
	switch {
	case before.Mode&unix.S_IFMT != unix.S_IFREG:
		return unavailablef("%s/%s: executable is not a regular file", class, name)
	case before.Mode&0o111 == 0:
		return unavailablef("%s/%s: executable has no execute bit", class, name)
	case devIno(&before) != r.Executable.DevIno:
		return unavailablef("%s/%s: executable is inode %s, receipt says %s", class, name, devIno(&before), r.Executable.DevIno)
	}
	sum, err := hashFile(exe, nil)
	if err != nil {
		return unavailableErr(err, "%s", where)
	}
	if err := unix.Fstat(efd, &after); err != nil {
		return unavailableErr(err, "%s", where)
	}
	if before.Size != after.Size || before.Mode != after.Mode || before.Mtim != after.Mtim || before.Ctim != after.Ctim {
		return unavailablef("%s/%s: executable changed while it was being inspected", class, name)
	}
	if sum != r.Executable.SHA256 {
		return unavailablef("%s/%s: executable sha256 %s, receipt says %s", class, name, sum, r.Executable.SHA256)
	}
	mo.Receipt = *r
	return nil
}

// Uninstall removes a receipt-managed object. Without apply it only
// verifies (a dry run). With apply it moves the executable out first (the
// object stops being found by CTX_PATH lookup at that instant), then the
// control directory, each into a hidden quarantine directory in the class
// directory, re-checking each moved inode against the receipt, and finally
// deletes the quarantine. It is not pair-atomic: callers should stop agents
// using the tool first.
func Uninstall(t Target, class, name string, apply bool) (*Installed, error) {
	mo, err := open(t, class, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(mo.cfd)
	if !apply {
		return &mo.Installed, nil
	}
	q, err := newStage(mo.cfd, mo.ClassDir, ".cortexfs-cleanup-")
	if err != nil {
		return nil, err
	}
	defer q.remove()
	r := &mo.Receipt
	if err := fsops.RenameNoReplaceAt(mo.cfd, name, q.fd, "executable"); err != nil {
		return nil, unavailableErr(err, "%s/%s: moving the executable out", class, name)
	}
	if err := verifyAt(q.fd, "executable", r.Executable.DevIno); err != nil {
		// Someone swapped it between inspection and the move: put it back.
		_ = fsops.RenameNoReplaceAt(q.fd, "executable", mo.cfd, name)
		return nil, unavailableErr(err, "%s/%s: executable changed before removal; left in place", class, name)
	}
	if err := unix.Fsync(mo.cfd); err != nil {
		return nil, unavailableErr(err, "syncing %s", mo.ClassDir)
	}
	if err := fsops.RenameNoReplaceAt(mo.cfd, name+".d", q.fd, "control"); err != nil {
		return nil, unavailableErr(err, "%s/%s: executable removed, but moving the control directory out failed", class, name)
	}
	if err := verifyAt(q.fd, "control", r.Control); err != nil {
		_ = fsops.RenameNoReplaceAt(q.fd, "control", mo.cfd, name+".d")
		return nil, unavailableErr(err, "%s/%s: executable removed, control directory changed and was left in place", class, name)
	}
	if err := unix.Fsync(mo.cfd); err != nil {
		return nil, unavailableErr(err, "syncing %s", mo.ClassDir)
	}
	return &mo.Installed, nil
}
