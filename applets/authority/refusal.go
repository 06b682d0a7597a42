package authority

import "ctx/applets/cli"

// DeniedPrefix is cli.DeniedPrefix: it starts the one standard-error line
// of every exit 13 that ctx itself decides for a tool in terminal CLI mode
// (ctx man ctx.tool, EXIT STATUS).
const DeniedPrefix = cli.DeniedPrefix

// DeniedLine is cli.DeniedLine: that line for a program called name, the
// prefix, then the line it would print for any other failure ("NAME:
// MESSAGE"), escaped for a terminal.
func DeniedLine(name, msg string) string {
	return cli.DeniedLine(name, msg)
}
