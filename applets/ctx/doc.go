// Package ctx holds the `ctx CMD VERB` commands: each parses its arguments,
// calls policy, fsops, lifecycle or runhost, prints, and returns an exit
// status from package cli.
package ctx
