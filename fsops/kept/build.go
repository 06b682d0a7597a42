package kept

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"ctx/fsops/sandbox"
	"ctx/policy/sandboxplan"
)

// buildTemplate builds the ops plan marks Template on a thread that
// leaves its new mount namespace afterwards (onThreadIn), and returns
// the template as a detached mount tree. The ops are applied by the
// init's own code, as an init would, relative to a fresh tmpfs on
// plan.NewRoot in the thread's private copy of the host's mount table;
// the template also holds the mount points of the run's own mounts, and
// names key in its marker. Its root is made read-only, and the tree
// beneath it copied out: nothing of the host's mount table goes with it.
func buildTemplate(plan *sandboxplan.Plan, key string) (*os.File, error) {
	var tree *os.File
	enter := func() error { return unix.Unshare(unix.CLONE_NEWNS) }
	err := onThreadIn(enter, func() error {
		if err := fillTemplate(plan, key); err != nil {
			return err
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, ".", unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return err
		}
		tree = os.NewFile(uintptr(fd), "template")
		return nil
	})
	if err != nil && tree != nil {
		tree.Close()
		tree = nil
	}
	return tree, err
}

// fillTemplate is buildTemplate's work in the thread's new namespace:
// the template, entered (the thread's working directory).
func fillTemplate(plan *sandboxplan.Plan, key string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making all mounts private: %w", err)
	}
	if err := sandbox.EnterNewRoot(plan, nil); err != nil {
		return err
	}
	points := map[int]bool{}
	for _, i := range sandboxplan.TemplateMountPoints(plan.Ops) {
		points[i] = true
	}
	for i, op := range plan.Ops {
		var err error
		switch {
		case op.Template:
			err = sandbox.ApplyOp(".", op)
		case points[i]:
			err = templateMountPoint(op)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", templateOpName(i, op), err)
		}
	}
	if err := checkTemplateBinds(plan.Ops); err != nil {
		return err
	}
	marker, err := os.OpenFile(templateMarker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return err
	}
	_, err = marker.WriteString(key + "\n")
	if cerr := marker.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Read-only, keeping the new root's nosuid and nodev.
	return unix.Mount("", ".", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// templateMountPoint makes, in the template being built, the mount point
// a run's own mount (op) needs: what MountPoint makes for a bind (a
// directory or a file, as its source is), a directory for the rest.
func templateMountPoint(op sandboxplan.Op) error {
	kind, err := mountPointKind(op)
	if err != nil || kind == '-' {
		return err
	}
	if kind == 'd' && op.Kind != sandboxplan.OpBind {
		return sandbox.MkdirAll(".", op.Target, 0o755)
	}
	pfd, _, err := sandbox.MountPoint(".", op.Target, kind == 'd')
	if err == nil {
		unix.Close(pfd)
	}
	return err
}

// checkTemplateBinds checks that each bind of the template shows the
// object its source names now (no source replaced while it was bound).
func checkTemplateBinds(ops []sandboxplan.Op) error {
	for i, op := range ops {
		if !op.Template || op.Kind != sandboxplan.OpBind {
			continue
		}
		want, err := sourceIdentity(op, false)
		if err != nil {
			return err
		}
		if string(want) == "absent\n" {
			continue
		}
		var st unix.Stat_t
		err = unix.Lstat(filepath.Join(".", op.Target), &st)
		if err != nil || string(identityOf(&st)) != string(want) {
			return fmt.Errorf("%s: the source changed while it was bound", templateOpName(i, op))
		}
	}
	return nil
}

// identityOf is sourceIdentity's device and inode for st.
func identityOf(st *unix.Stat_t) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, st.Dev), st.Ino)
}
