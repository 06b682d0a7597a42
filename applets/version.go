package applets

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"ctx/applets/cli"
)

// version is set by build.sh with -ldflags '-X ctx/applets.version=V'. Left
// empty, the module version the go command stamped is used: a tag for a
// `go install ctx@vX`, "(devel)" for a checkout.
var version string

// commit is set by build.sh (-X ctx/applets.commit=REV) for builds where
// the go command does not stamp the revision itself (-buildvcs=false, or
// git refusing a checkout another user owns); the stamp wins when present.
var commit string

// ldflags are build.sh's linker flags besides the -X stamps: the go
// command does not record -ldflags in a -trimpath build.
var ldflags string

// modified is "true" when build.sh saw uncommitted changes (with commit).
var modified string

// buildSettings are the build settings --version reports as "build", in
// this order: what changes the binary's behaviour or lets a person rebuild
// the same one.
var buildSettings = []string{"-buildmode", "-compiler", "-tags", "-trimpath", "-race", "-ldflags", "-gcflags", "CGO_ENABLED", "GOAMD64", "GOARM64", "GOARM", "GO386", "GOPPC64", "GORISCV64"}

// printVersion prints `ctx --version`: the version, the commit (with its
// time and whether the tree had uncommitted changes), the Go toolchain and
// platform, and the build flags, one fact per line.
func printVersion(e *cli.Env) {
	v := version
	settings := map[string]string{}
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(e.Stdout, "ctx %s\n", v)
	rev := settings["vcs.revision"]
	if rev == "" {
		rev = commit
		settings["vcs.modified"] = modified
	}
	if rev == "" {
		rev = "unknown (built without version control information)"
	} else {
		var notes []string
		if t := settings["vcs.time"]; t != "" {
			notes = append(notes, t)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "modified")
		}
		if len(notes) > 0 {
			rev += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	fmt.Fprintf(e.Stdout, "commit %s\n", rev)
	fmt.Fprintf(e.Stdout, "go     %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	var flags []string
	for _, k := range buildSettings {
		val, ok := settings[k]
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "-") && val == "true":
			flags = append(flags, k)
		case strings.HasPrefix(k, "-") && strings.ContainsAny(val, " \t\"'"):
			flags = append(flags, k+"="+quoteFlag(val))
		default:
			flags = append(flags, k+"="+val)
		}
	}
	if _, ok := settings["-ldflags"]; !ok && ldflags != "" {
		flags = append(flags, "-ldflags="+quoteFlag(ldflags))
	}
	fmt.Fprintf(e.Stdout, "build  %s\n", strings.Join(flags, " "))
}

// quoteFlag quotes a flag value with spaces the way a shell user would
// type it back.
func quoteFlag(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
