package applets

// Exit codes shared by every applet. They are documented in the manual
// (ctx.tool, "Exit status") and form part of the tool ABI.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2   // bad arguments or bad input format
	exitDenied      = 13  // refused by policy (EACCES); agentrc's distinct denied code
	exitUnavailable = 69  // the object exists but cannot run here (EX_UNAVAILABLE)
	exitInternal    = 70  // internal error (EX_SOFTWARE)
	exitNotExec     = 126 // found but not executable
	exitNotFound    = 127 // unknown applet or tool (POSIX shells use 127 too)
)
