package toolrun

import (
	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/broker"
)

// recordToolEvent appends the tool.call event of this call. Inside an agent
// run the event belongs to the run host, which owns the audit trail; a human's
// direct call is appended to tool/NAME.d/log beside the executable (see
// authority.RecordToolCall, which tsh's own refusals go through too). A log
// that cannot be written is reported on stderr; the call's result stands.
func recordToolEvent(e *cli.Env, dir string, ev fsops.Event) {
	if e.Getenv(broker.BrokeredEnv) != "" {
		// The run host records the call it brokered; the tool adds what
		// only it knows, on the call's channel.
		if ev.Errno != "" || ev.Layer != "" || ev.Detail != "" {
			reportBrokeredCall(ev)
		}
		return
	}
	if err := authority.RecordToolCall(e.Getenv, dir, ev); err != nil {
		cli.Warnf(e, "event not logged: %v", err)
	}
}
