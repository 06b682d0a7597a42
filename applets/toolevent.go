package applets

import (
	"fmt"
	"os"
	"path/filepath"

	"ctx/applets/authority"
	"ctx/fsops"
)

// recordToolEvent appends the tool.call event of this call. Inside an agent
// run the event belongs to the run host, which owns the audit trail; a human's
// direct call is appended to tool/NAME.d/log beside the executable. A log
// that cannot be written is reported on stderr; the call's result stands.
func recordToolEvent(e *Env, dir string, ev fsops.Event) {
	ev.Agent = e.Getenv("CTX_AGENT")
	ev.Session = e.Getenv("CTX_SESSION")
	ev.Run = e.Getenv("CTX_RUN_ID")
	uid := os.Getuid()
	ev.UID = &uid
	if authority.Report(e.Getenv, ev) {
		return
	}
	if dir == "" {
		return
	}
	if err := fsops.AppendEvent(filepath.Join(dir, "log"), ev); err != nil {
		fmt.Fprintf(e.Stderr, "%s: warning: event not logged: %v\n", e.Name, err)
	}
}
