package toolrun

import (
	"ctx/applets/authority"
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/broker"
)

// recordToolEvent appends the tool.call event of a call this process
// decided itself (Execute without the run host's order): a person's direct
// call is appended to tool/NAME.d/log beside the executable (see
// authority.RecordToolCall, which tsh's own refusals go through too), a
// call in a run without a broker goes to its run host. A direct execution
// inside a run (broker.BrokeredEnv set by hand) is not recorded: it is the
// process's own doing, as if it had done it without the tool. A log that
// cannot be written is reported on stderr; the call's result stands.
func recordToolEvent(e *cli.Env, dir string, ev fsops.Event) {
	if e.Getenv(broker.BrokeredEnv) != "" {
		return
	}
	if err := authority.RecordToolCall(e.Getenv, dir, ev); err != nil {
		cli.Warnf(e, "event not logged: %v", err)
	}
}
