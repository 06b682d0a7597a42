// Package lifecycle is an agent's life on disk, shared by `ctx agent`, the
// agent.* tools and the run host: creating an agent (whole or not at all),
// finding its live run and calling into it, stopping a run and its
// children, the session a run records into, its skills and its sop.
package lifecycle
