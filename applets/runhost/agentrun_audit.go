package runhost

import (
	"bytes"

	"ctx/fsops"
)

// Bounds of the session's events a run's audit begins with.
const (
	auditSeedLines = 64
	auditSeedBytes = 64 << 10
)

// sessionAuditTail is what a run's audit (/mnt/proc/audit, ctx run A --
// audit tail) begins with: the last events of its session before it (at
// most auditSeedLines whole lines from the last auditSeedBytes), so the
// audit is the session's stream (the tool calls, grants and denials of
// earlier runs) and not only what this run did. The session's events file
// is the host's: the agent reads its sessions and never rewrites them.
func sessionAuditTail(events string) []byte {
	f, err := fsops.OpenRegular(events)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := st.Size() - auditSeedBytes
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(buf, off)
	buf = buf[:n]
	if off > 0 { // the first line may be cut: drop it
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		} else {
			return nil
		}
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i+1] // whole lines only
	} else {
		return nil
	}
	for lines := bytes.Count(buf, []byte{'\n'}); lines > auditSeedLines; lines-- {
		buf = buf[bytes.IndexByte(buf, '\n')+1:]
	}
	return buf
}

// liveChildren is how many children this run started (agent.start) are
// running: the use of the children budget.
func (r *AgentRun) liveChildren() int {
	b := r.broker
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.children)
}
