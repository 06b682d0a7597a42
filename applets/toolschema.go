package applets

// printToolSchema answers `TOOL --agentrc-schema`.
func printToolSchema(e *Env, name string) int {
	return fail(e, exitInternal, "no schema")
}
