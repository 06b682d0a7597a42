// Package runhost is one run of an agent: its preparation (who may start
// it, its session, workspace, sandbox plan), its start, its hosting and its
// end; and the host side of the run's broker, which admits, decides,
// orders and records every tool call made inside the run (DESIGN §8, §16).
// It is the privileged half of ctx: read it as one package.
package runhost
