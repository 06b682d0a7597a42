package policy

import "fmt"

// WorkspaceWriteWarning is the warning a run gets when its agent runs as
// its own uid on the workspace as it is (iso landlock, or iso uid without
// an idmapped workspace, both started by root) and that uid cannot create
// files at the workspace's top by its mode: everything the agent tries to
// write there fails with EACCES, git calls the checkout of dubious
// ownership, and nothing said why. f is the workspace directory's lstat.
// "" when the agent may write it, or its perm has no w (read-only by
// design). ACLs are not read: an ACL that grants the uid makes the
// warning wrong, never the sandbox weaker.
func WorkspaceWriteWarning(a *Agent, f FileFacts) string {
	if !a.Ceiling.Has(CeilingWrite) || a.UID == 0 {
		return ""
	}
	if bits, _ := ModeClass(a, &f); bits.Has(CeilingWrite | CeilingExec) {
		return ""
	}
	fix := fmt.Sprintf("let that uid write it (chown -R %d:%d %s, or setfacl -R -m u:%d:rwX %s)", a.UID, a.GID, f.Path, a.UID, f.Path)
	if f.UID != 0 {
		// Root's workspace is no uid to run an agent as.
		fix += fmt.Sprintf(", or run the agent as the workspace's owner (ctx set agent/%s.d/uid %d, and gid)", a.Name, f.UID)
	}
	return fmt.Sprintf("the agent's uid %d cannot write the workspace %s (mode %04o owner %d:%d): fix: %s",
		a.UID, f.Path, uint32(f.Mode.Perm()), f.UID, f.GID, fix)
}
