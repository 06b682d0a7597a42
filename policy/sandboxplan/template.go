package sandboxplan

import (
	"fmt"

	"ctx/policy"
)

// A sandbox's template (ctx man sandbox, MODES; fsops/sandbox/template.go).
// Most of a uid-mode plan is the same for every run of an agent whose
// policy did not change: the synthesized /etc, /dev, /ctx with its tool
// tiers, /mnt and the home. That part is built once into a mount namespace
// that is kept, and each run's init attaches a copy of it, made by the
// kernel in one step, and applies only the rest: the system directories
// (rbinds), /proc with its masks, /tmp, /dev/shm, /dev/pts, /mnt/proc, the
// workspace, the mount lines and --mount entries, the loopback, the
// pivot. Op.Template marks the ops of the template; an init handed no
// template applies every op, marked or not.
//
// What may be in a template is what every run of the same plan gets the
// same and no run can change: binds of host files and directories (the
// same objects each run, checked each start by identity), and tmpfs
// mounts that the plan makes read-only, with what is made in them. A
// tmpfs that stays writable (/tmp, /dev/shm), a filesystem of the run's
// own namespaces (/proc, /dev/pts), an rbind (whose submounts may change
// between runs), and whatever is mounted under a run's own mount, never
// are.

// markTemplate sets Template on the ops a template may hold; perRun are
// the ops BuildPlan made from this run's own inputs (the run directory,
// the workspace and its protected paths, the mount lines and --mount
// entries).
func markTemplate(ops []Op, perRun map[int]bool) {
	readOnly := map[string]bool{} // targets the plan makes read-only
	for _, op := range ops {
		if op.Kind == OpPivotRoot {
			break
		}
		if op.Kind == OpReadOnly {
			readOnly[op.Target] = true
		}
	}
	var run []string            // targets of the run's own mounts so far
	inTmpl := map[string]bool{} // targets of template mounts so far
	for i := range ops {
		op := &ops[i]
		if op.Kind == OpPivotRoot {
			break
		}
		ok := !perRun[i] && !policy.WithinAny(op.Target, run)
		switch op.Kind {
		case OpBind:
			ok = ok && !op.Recursive && !op.IDMap
		case OpTmpfs:
			ok = ok && readOnly[op.Target]
		case OpSymlink, OpDir, OpFile:
		case OpReadOnly:
			ok = ok && inTmpl[op.Target]
		default:
			ok = false
		}
		if ok && mounts(op.Kind) && coversAny(op.Target, run) {
			ok = false // mounted over one of the run's own in the plan's order
		}
		op.Template = ok
		switch {
		case ok && mounts(op.Kind):
			inTmpl[op.Target] = true
		case !ok && mounts(op.Kind):
			run = append(run, op.Target)
		}
	}
}

// mounts reports whether ops of kind k mount something at their target.
func mounts(k OpKind) bool {
	switch k {
	case OpBind, OpTmpfs, OpProc, OpDevpts, OpMask, OpProtect:
		return true
	}
	return false
}

// coversAny reports whether one of dirs is beneath p.
func coversAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if d != p && policy.Within(d, p) {
			return true
		}
	}
	return false
}

// TemplateMountPoints are the ops outside the template whose mount points
// the template must hold, made before its tmpfs mounts go read-only: the
// run's own mounts on a template's tmpfs (not those beneath another of
// the run's mounts, which that mount provides).
func TemplateMountPoints(ops []Op) []int {
	var run []string
	var out []int
	for i, op := range ops {
		if op.Kind == OpPivotRoot {
			break
		}
		if op.Template || !mounts(op.Kind) {
			continue
		}
		if !policy.WithinAny(op.Target, run) {
			out = append(out, i)
		}
		run = append(run, op.Target)
	}
	return out
}

// HasTemplate reports whether any op of the plan is marked for a template.
func (p *Plan) HasTemplate() bool {
	for _, op := range p.Ops {
		if op.Template {
			return true
		}
	}
	return false
}

// validateTemplate checks the template marks: only ops a template may
// hold, before the pivot, each tmpfs made read-only by a marked op, and
// nothing marked beneath a mount of the run's own.
func validateTemplate(ops []Op) error {
	var run []string
	marked := map[string]bool{}
	pivoted := false
	for i, op := range ops {
		if op.Kind == OpPivotRoot {
			pivoted = true
		}
		if !op.Template {
			if mounts(op.Kind) {
				run = append(run, op.Target)
			}
			continue
		}
		bad := ""
		switch {
		case pivoted:
			bad = "after pivot_root"
		case op.Kind == OpBind && (op.Recursive || op.IDMap):
			bad = "an rbind or idmapped bind"
		case op.Kind == OpReadOnly && !marked[op.Target]:
			bad = "read-only of a mount not in the template"
		case op.Kind == OpTmpfs && !readOnlyLater(ops[i+1:], op.Target):
			bad = "a tmpfs that stays writable"
		case op.Kind != OpBind && op.Kind != OpTmpfs && op.Kind != OpSymlink && op.Kind != OpDir && op.Kind != OpFile && op.Kind != OpReadOnly:
			bad = "not a kind a template holds"
		case policy.WithinAny(op.Target, run):
			bad = "beneath a mount of the run's own"
		}
		if bad != "" {
			return fmt.Errorf("plan: op %d (%s %s) marked for the template: %s", i, op.Kind, op.Target, bad)
		}
		if mounts(op.Kind) {
			marked[op.Target] = true
		}
	}
	return nil
}

// readOnlyLater reports whether ops make target read-only in the template.
func readOnlyLater(ops []Op, target string) bool {
	for _, op := range ops {
		if op.Kind == OpReadOnly && op.Target == target && op.Template {
			return true
		}
	}
	return false
}
