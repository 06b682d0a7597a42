// Command ctx is a busybox-style multicall binary: it picks an applet from the
// base name of argv[0] (or from argv[1] when invoked as ctx) and runs it.
package main

import (
	"os"

	"ctx/applets"
)

func main() { os.Exit(applets.Main(os.Args)) }
