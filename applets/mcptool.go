package applets

// projectedToolApplet returns the applet that runs an installed tool whose
// executable is this binary under a name that is not an applet (an
// MCP-projected tool such as github.search_issues). Filled in by the MCP
// work; until then no such tool exists.
func projectedToolApplet(e *Env, name string) (Applet, bool) { return Applet{}, false }
