package runhost

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"ctx/applets/egress"
	"ctx/fsops"
	"ctx/fsops/sandbox"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// hostEtc gathers the host's entries of sandboxplan.HostEtcNames for the
// synthesized /etc: symlinks are recreated as symlinks (never followed to
// a bind source), resolv.conf is copied (it is often a symlink into /run,
// which the sandbox does not have), files and directories are bound.
func hostEtc() []sandboxplan.HostEtc {
	var out []sandboxplan.HostEtc
	for _, name := range sandboxplan.HostEtcNames {
		p := filepath.Join("/etc", name)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		e := sandboxplan.HostEtc{Name: name}
		switch {
		case name == "resolv.conf":
			// The host's own file, read through its symlink: it is not
			// a bind source, and only its bytes cross.
			f, err := os.Open(p)
			if err != nil {
				continue
			}
			b, err := fsops.ReadLimited(f, p, 64<<10)
			f.Close()
			if err != nil {
				continue
			}
			e.Data = b
		case st.Mode()&fs.ModeSymlink != 0:
			if e.Symlink, err = os.Readlink(p); err != nil {
				continue
			}
		case st.IsDir():
			e.Dir = true
		case !st.Mode().IsRegular():
			continue
		}
		out = append(out, e)
	}
	return out
}

// workspaceIDMap prepares, for a uid-mode run, the idmapped workspace: the
// workspace's on-disk owner shown as the agent. It returns the mapping for
// the plan and the tree for the sandbox, or nil and the reason it could not
// (a kernel or filesystem without idmapped mounts), which /mnt/proc/policy
// states.
func (r *AgentRun) workspaceIDMap(op sandboxplan.Op) (*sandboxplan.IDMap, *os.File, string) {
	st, err := fsops.Stat(r.workspace)
	if err != nil {
		return nil, nil, err.Error()
	}
	m := sandbox.IDMapping{DiskUID: st.Uid, DiskGID: st.Gid, UID: r.Agent.UID, GID: r.Agent.GID}
	// The kept user namespaces are the user's, above the tree's level of
	// the runtime directory: each is named by its mapping and holds
	// nothing of a run, and one kept per tree would leave a mount per tree.
	tree, err := sandbox.IDMappedTree(r.workspace, m, sandbox.MountAttrs(op), filepath.Dir(r.runtime))
	if err != nil {
		return nil, nil, err.Error()
	}
	return &sandboxplan.IDMap{DiskUID: st.Uid, DiskGID: st.Gid}, tree, ""
}

// wallLines are the /mnt/proc/policy lines that say which walls the run
// has beyond its mounts: seccomp, Landlock and the workspace's ownership.
func (r *AgentRun) wallLines(idmapWhy string) []string {
	lines := []string{"sandbox seccomp enforced (denied: see ctx man sandbox)", egress.SocketsLine(networkGranted(r.Agent), r.net)}
	if r.iso == policy.IsoLandlock {
		lines = append(lines, "sandbox iso landlock: no namespaces and no mounts; /ctx is CTX_ROOT, /mnt/proc is CTX_RUN_DIR, the broker is CTX_BROKER (host paths)")
		lines = append(lines, r.landlockHomeLine())
		if !networkGranted(r.Agent) && r.net == nil {
			lines = append(lines, "sandbox network refused: seccomp allows AF_UNIX sockets only, Landlock denies TCP")
		}
	}
	abi, err := sandbox.LandlockABI()
	if r.iso == policy.IsoLandlock {
		lines = append(lines, landlockUnixLine(abi))
	}
	if abi > 0 {
		lines = append(lines, fmt.Sprintf("sandbox landlock abi=%d enforced", abi))
	} else {
		lines = append(lines, fmt.Sprintf("sandbox landlock unavailable: %v (the run goes on behind its mounts and seccomp)", err))
	}
	switch {
	case r.iso != policy.IsoUID:
	case idmapWhy == "":
		lines = append(lines, fmt.Sprintf("sandbox workspace idmapped: the workspace owner's files are the agent's (uid %d)", r.Agent.UID))
	default:
		lines = append(lines, fmt.Sprintf("sandbox workspace not idmapped: %s; the agent writes it as uid %d under its permissions", idmapWhy, r.Agent.UID))
	}
	return lines
}

// landlockUnixLine says what keeps an iso landlock run off the host's
// pathname unix sockets (ctx man sandbox, UNIX SOCKETS).
func landlockUnixLine(abi int) string {
	if abi >= sandbox.LandlockABIResolveUnix {
		return "sandbox unix sockets: connect reaches the run's broker and the places it may write, nothing else (Landlock RESOLVE_UNIX, abi " + strconv.Itoa(abi) + ")"
	}
	return "sandbox unix sockets: connect reaches the run's broker and the places it may write, nothing else (the run host's unix gate, Landlock abi " + strconv.Itoa(abi) + " < 9); no unix datagram sockets"
}

// canonicalDir resolves the symlinks of a directory the caller named (the
// root, the workspace): the caller's own choice, resolved once on the host,
// so every bind source below it can then be opened without following any.
func canonicalDir(dir string) (string, error) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	st, err := fsops.Stat(p)
	if err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", fmt.Errorf("%s: not a directory", dir)
	}
	return p, nil
}
