package kept

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/fsops/sandbox"
	"ctx/policy/sandboxplan"
)

// A kept template of a uid-mode sandbox (sandboxplan/template.go; ctx man
// sandbox, MODES). The ops a plan marks Template are built once, in a
// mount namespace of their own, into a tmpfs root that holds them,
// read-only; that tree is kept in the holder (holder.go) as
// /TREE/mnt@AGENT@KEY. A run whose plan has the same KEY gets a copy of
// the whole tree, made by the kernel in one step (open_tree, on a thread
// of the run host that joined the holder), which its init attaches as
// the new root before it applies the plan's other ops.
//
// KEY says everything the template's contents depend on, so a run never
// gets a view its own plan would not have built: the marked ops as the
// init receives them (sources, targets, flags, the tmpfs contents), the
// mount points the template holds for the run's own mounts, the binary
// that builds it, and the identity of every source it binds, looked up
// each start the way the init opens one (no symlink in any component):
// device and inode, file type, and the flags of the mount it is on. A
// policy change, a tool replaced, a source turned into a symlink or
// remounted, another mount over it: each makes another KEY, and the
// template is built again. The builder checks that what it bound is what
// the key names, and keeps nothing else.

// templateVersion changes when what a template holds is built differently.
const templateVersion = "ctx-template-1"

// templateMarker is the file in the template's /proc mount point that
// names the key it was built for: a kept namespace that does not say so
// is never copied from. The run's /proc covers it.
const templateMarker = "proc/.ctx-template"

// templatePrefix begins the name of an agent's kept template.
const templatePrefix = "mnt@"

// ErrNoTemplate says the plan has no template part.
var ErrNoTemplate = errors.New("the plan has no template")

// templateKey computes plan's template key, looking up every source the
// template binds; an error (a source refused, say) means the run goes
// without a template, and its init will report the same refusal.
func templateKey(plan *sandboxplan.Plan) (string, error) {
	if plan.RootFS || !plan.HasTemplate() {
		return "", ErrNoTemplate
	}
	h := sha256.New()
	exe, err := exeIdentity()
	if err != nil {
		return "", err
	}
	h.Write([]byte(templateVersion + "\n" + exe + "\n"))
	var marked []sandboxplan.Op
	for _, op := range plan.Ops {
		if op.Template {
			marked = append(marked, op)
		}
	}
	h.Write(sandbox.EncodeOps(marked))
	var b []byte
	for _, op := range marked {
		if op.Kind != sandboxplan.OpBind {
			continue
		}
		id, err := sourceIdentity(op, true)
		if err != nil {
			return "", err
		}
		b = append(b, id...)
	}
	for _, i := range sandboxplan.TemplateMountPoints(plan.Ops) {
		op := plan.Ops[i]
		b = append(b, op.Target...)
		kind, err := mountPointKind(op)
		if err != nil {
			return "", err
		}
		b = append(b, 0, kind)
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// exeIdentity names this binary's file: device, inode, size, mtime.
var exeIdentity = sync.OnceValues(func() (string, error) {
	p, err := fsops.Executable()
	if err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, st.Size, st.Mtim.Nano()), nil
})

// sourceIdentity is what a bind's source is now, as the init would open
// it: device, inode and type of the object, and the flags of the mount
// it is on; or that an optional one is absent. With flags false, only
// device and inode (what the builder can see of what it bound).
func sourceIdentity(op sandboxplan.Op, flags bool) ([]byte, error) {
	fd, err := fsops.OpenNoSymlinks(op.Source)
	if err != nil {
		if op.Optional && errors.Is(err, os.ErrNotExist) {
			return []byte("absent\n"), nil
		}
		return nil, fmt.Errorf("source %s: %w", op.Source, fsops.ExplainNoSymlinks(err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	b := identityOf(&st)
	if !flags {
		return b, nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(st.Mode&unix.S_IFMT))
	return binary.AppendUvarint(b, uint64(fs.Flags)), nil
}

// mountPointKind is the kind of mount point a run's own mount needs in the
// template: d (a directory), f (a file), or - (none: an optional bind
// whose source is absent).
func mountPointKind(op sandboxplan.Op) (byte, error) {
	if op.Kind != sandboxplan.OpBind || op.IDMap {
		return 'd', nil
	}
	fd, err := fsops.OpenNoSymlinks(op.Source)
	if err != nil {
		if op.Optional && errors.Is(err, os.ErrNotExist) {
			return '-', nil
		}
		return 0, fmt.Errorf("source %s: %w", op.Source, fsops.ExplainNoSymlinks(err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return 'd', nil
	}
	return 'f', nil
}

// Template is a copy of the template kept for plan, a run of agent of the
// tree treeKey at treeDir, in the holder under runtime, the user's runtime
// directory (holder.go): a detached mount tree for the init to attach
// (sandbox.Sandbox.SetTemplateTree). A template not kept yet for the
// plan's key is built and kept first, releasing the agent's templates of
// other keys. An error means the run goes without one: its init applies
// the whole plan.
func Template(plan *sandboxplan.Plan, runtime, treeKey, treeDir, agent string) (*os.File, error) {
	key, err := templateKey(plan)
	if err != nil {
		return nil, err
	}
	holder, err := openHolder(runtime)
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	name := templatePrefix + agent + "@" + key
	if t, err := cloneTemplate(holder, treeKey, name, key); err == nil {
		return t, nil
	}
	built, err := buildTemplate(plan, key)
	if err != nil {
		return nil, err
	}
	defer built.Close()
	// What was looked up before the build is still so after it: a source
	// changed meanwhile may be in the template either way, and such a
	// template is not kept.
	if again, err := templateKey(plan); err != nil || again != key {
		return nil, fmt.Errorf("a source changed while the template was built")
	}
	if err := keepInHolder(holder, built, treeKey, treeDir, name, templatePrefix+agent+"@"); err != nil {
		return nil, err
	}
	return cloneTemplate(holder, treeKey, name, key)
}

// cloneTemplate copies the template kept as the holder's /TREE/name, on a
// thread that joins the holder for that (onThreadIn): its marker must
// name key.
func cloneTemplate(holder *os.File, tree, name, key string) (*os.File, error) {
	var t *os.File
	err := inHolder(holder, func() error {
		p := "/" + tree + "/" + name
		if b, err := fsops.ReadRegular(p+"/"+templateMarker, 256); err != nil || string(b) != key+"\n" {
			return fmt.Errorf("%s: not the template for %s", name, key)
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return err
		}
		t = os.NewFile(uintptr(fd), "template")
		// A template's root is read-only: the init makes nothing in it.
		var fs unix.Statfs_t
		if err := unix.Fstatfs(fd, &fs); err != nil || fs.Flags&unix.ST_RDONLY == 0 {
			return fmt.Errorf("%s: not read-only", name)
		}
		return nil
	})
	if err != nil && t != nil {
		t.Close()
		t = nil
	}
	return t, err
}

// templateOpName names op i of a plan in errors.
func templateOpName(i int, op sandboxplan.Op) string {
	return "template op " + strconv.Itoa(i) + " (" + string(op.Kind) + " " + op.Target + ")"
}
