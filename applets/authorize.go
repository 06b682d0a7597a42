package applets

// authorizeTool decides whether the current process may run tool name.
// Outside an agent context (a human at a shell) it allows: the tool runs with
// the caller's own Linux permissions and nothing more. Inside an agent
// context it must run the full authority check.
//
// It returns the exit code and the refusing layer when denied.
func authorizeTool(e *Env, name string) (code int, layer string, ok bool) {
	if e.Getenv("CTX_AGENT") == "" {
		return 0, "", true
	}
	// The policy check is wired here once package policy provides it; until
	// then an agent context is refused rather than trusted.
	return exitDenied, "agent-policy", false
}
