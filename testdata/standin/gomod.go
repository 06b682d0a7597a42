package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The stand-in Go module the go recipe's project requires, served by the
// stand-in proxy.golang.org (the GOPROXY protocol: list, .info, .mod,
// .zip of module@version/ files).
const (
	goModule  = "example.com/greet"
	goVersion = "v1.0.0"
	goModFile = "module example.com/greet\n\ngo 1.22\n"
)

var goFiles = map[string]string{
	"go.mod":   goModFile,
	"greet.go": "// Package greet greets.\npackage greet\n\n// Hello is the greeting.\nfunc Hello() string { return \"hello from example.com/greet\" }\n",
}

var goZip = makeZip(goModule+"@"+goVersion+"/", goFiles)

func goProxy(rest string) (int, string, []byte) {
	switch rest {
	case "list":
		return 200, "text/plain", []byte(goVersion + "\n")
	case goVersion + ".info":
		return 200, "application/json", []byte(`{"Version":"` + goVersion + `","Time":"2026-01-01T00:00:00Z"}`)
	case goVersion + ".mod":
		return 200, "text/plain", []byte(goModFile)
	case goVersion + ".zip":
		return 200, "application/zip", goZip
	}
	return 404, "text/plain", []byte("not found\n")
}

// hash1 is the go command's h1: hash (golang.org/x/mod/sumdb/dirhash) of
// files named as given.
func hash1(names []string, content func(string) string) string {
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%x  %s\n", sha256.Sum256([]byte(content(n))), n)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// gosum prints the stand-in module's go.sum lines, which a project that
// requires it carries: with them the go command checks the download
// against go.sum and asks no checksum database.
func gosum() int {
	var zipNames []string
	for _, n := range sortedKeys(goFiles) {
		zipNames = append(zipNames, goModule+"@"+goVersion+"/"+n)
	}
	fmt.Printf("%s %s %s\n", goModule, goVersion, hash1(zipNames, func(n string) string {
		return goFiles[strings.TrimPrefix(n, goModule+"@"+goVersion+"/")]
	}))
	fmt.Printf("%s %s/go.mod %s\n", goModule, goVersion, hash1([]string{"go.mod"}, func(string) string { return goModFile }))
	return 0
}

// recipe prints a recipe's shell: `recipe TITLE [N]` reads a manual page
// on stdin and prints the body of the Nth fenced block (all of them,
// without N) under the heading "### TITLE", up to the next heading.
func recipe(args []string) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: ctx-standin recipe TITLE [N] < PAGE")
		return 2
	}
	want := 0
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "recipe: N must be a positive number")
			return 2
		}
		want = n
	}
	sc := bufio.NewScanner(os.Stdin)
	var in, fenced bool
	block, found := 0, 0
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !fenced && strings.HasPrefix(l, "#"):
			in = l == "### "+args[0]
		case in && strings.HasPrefix(l, "```"):
			fenced = !fenced
			if fenced {
				block++
			}
		case in && fenced && (want == 0 || block == want):
			fmt.Println(l)
			found++
		}
	}
	if found == 0 {
		fmt.Fprintf(os.Stderr, "recipe: no block %d under ### %s\n", want, args[0])
		return 1
	}
	return 0
}
