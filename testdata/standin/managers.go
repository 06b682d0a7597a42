package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// managerShim stands in for rustup's proxies (by their names, as rustup's
// binary goes by its name) and for volta-shim (its own name, or any in
// volta's bin): as
// they do, it finds the manager's home by its variable or in HOME, reads
// the version the person chose there (volta's tools/user/platform.json,
// rustup's settings.toml or RUSTUP_TOOLCHAIN), and executes the tool of
// that name from the manager's tree; false when it is in neither bin.
func managerShim(name string, args []string) (int, bool) {
	exe, err := os.Executable()
	if err != nil {
		return 0, false
	}
	dir := filepath.Dir(exe)
	home := func(variable, rel string) string {
		if v := os.Getenv(variable); v != "" {
			return v
		}
		return filepath.Join(os.Getenv("HOME"), rel)
	}
	var tool string
	switch {
	case rustupProxies[name]:
		// rustup's proxies go by their name, wherever they are
		root := home("RUSTUP_HOME", ".rustup")
		toolchain, err := chosen(filepath.Join(root, "settings.toml"), `default_toolchain\s*=\s*"([^"]+)"`, os.Getenv("RUSTUP_TOOLCHAIN"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: rustup could not choose a version of %s to run: %v\n", name, err)
			return 1, true
		}
		tool = filepath.Join(root, "toolchains", toolchain, "bin", name)
	case filepath.Base(exe) == "volta-shim" || dir == filepath.Join(home("VOLTA_HOME", ".volta"), "bin"):
		root := home("VOLTA_HOME", ".volta")
		version, err := chosen(filepath.Join(root, "tools/user/platform.json"), `"runtime"\s*:\s*"([^"]+)"`, "")
		if err != nil {
			fmt.Fprintf(os.Stderr, "Volta error: Could not determine the Node version: %v\n", err)
			return 1, true
		}
		tool = filepath.Join(root, "tools/image/node", version, "bin", name)
	default:
		return 0, false
	}
	err = syscall.Exec(tool, append([]string{tool}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "%s: cannot run %s: %v\n", name, tool, err)
	return 1, true
}

// rustupProxies are the names rustup installs its proxies as.
var rustupProxies = map[string]bool{"cargo": true, "rustc": true, "rustdoc": true, "rustfmt": true, "cargo-fmt": true,
	"cargo-clippy": true, "clippy-driver": true, "rust-analyzer": true, "rust-gdb": true, "rust-lldb": true}

// chosen is the version the first group of pattern finds in file, or
// given when not empty.
func chosen(file, pattern, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(pattern).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s names none", file)
	}
	return string(m[1]), nil
}
