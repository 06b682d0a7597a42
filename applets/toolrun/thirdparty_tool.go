package toolrun

import (
	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/proc"
)

// RunThirdPartyTool is /mnt/tools/NAME for a tool that is not ctx (a
// program or script in a tool tier): /mnt/tools links every name to ctx,
// which asks the run host to run the call, so a third-party tool is
// decided on the live tree, executed from its tier by the sandbox's init
// and recorded by the host, as a builtin is. Without a broker to ask (a
// run whose broker could not be bound) the tier's file, exe, is executed
// in this process's place, as the link once did.
func RunThirdPartyTool(e *cli.Env, name, exe string, args []string) int {
	if code, ok := BrokeredCall(e, name, args); ok {
		return code
	}
	err := fsops.ExecProgram(exe, append([]string{name}, args...), e.Environ())
	return cli.Fail(e, proc.StartFailure(err), "%s: %v", name, err)
}
