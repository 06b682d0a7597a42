package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// npm stands in for `npm install [NAME...]`: each package (the arguments,
// else package.json's dependencies) from the registry (npm_config_registry,
// .npmrc, else registry.npmjs.org), its tarball checked against the
// packument's integrity, kept in ~/.npm/_cacache, unpacked into
// node_modules/NAME.
func npm(args []string) int {
	if len(args) == 3 && args[0] == "config" && args[1] == "get" && args[2] == "registry" {
		fmt.Println(npmRegistry())
		return 0
	}
	if len(args) == 0 || (args[0] != "install" && args[0] != "i" && args[0] != "ci") {
		fmt.Fprintln(os.Stderr, "npm: the stand-in knows install, i, ci and config get registry")
		return 1
	}
	names := args[1:]
	if len(names) == 0 {
		var pkg struct{ Dependencies map[string]string }
		b, err := os.ReadFile("package.json")
		if err == nil {
			err = json.Unmarshal(b, &pkg)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "npm error code ENOENT\nnpm error %v\n", err)
			return 1
		}
		for n := range pkg.Dependencies {
			names = append(names, n)
		}
	}
	for _, n := range names {
		if err := npmInstall(n); err != nil {
			fmt.Fprintf(os.Stderr, "npm error %v\n", err)
			return 1
		}
	}
	fmt.Printf("added %d packages in 0s\n", len(names))
	return 0
}

func npmRegistry() string {
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := os.Getenv(k); v != "" {
			return strings.TrimSuffix(v, "/") + "/"
		}
	}
	for _, rc := range []string{".npmrc", filepath.Join(homeDir(), ".npmrc")} {
		b, _ := os.ReadFile(rc)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "registry="); ok {
				return strings.TrimSuffix(v, "/") + "/"
			}
		}
	}
	return "https://registry.npmjs.org/"
}

func npmInstall(name string) error {
	b, err := fetch(npmRegistry() + name)
	if err != nil {
		return fmt.Errorf("request to %s%s failed: %v", npmRegistry(), name, err)
	}
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Dist struct{ Tarball, Integrity string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: bad packument: %v", name, err)
	}
	dist := doc.Versions[doc.DistTags["latest"]].Dist
	tgz, err := fetch(dist.Tarball)
	if err != nil {
		return fmt.Errorf("request to %s failed: %v", dist.Tarball, err)
	}
	sum := sha512.Sum512(tgz)
	if "sha512-"+base64.StdEncoding.EncodeToString(sum[:]) != dist.Integrity {
		return fmt.Errorf("code EINTEGRITY: %s: integrity checksum failed", dist.Tarball)
	}
	h := hex.EncodeToString(sum[:])
	cache := filepath.Join(homeDir(), ".npm/_cacache/content-v2/sha512", h[:2], h[2:4])
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cache, h[4:]), tgz, 0o644); err != nil {
		return err
	}
	return untgz(tgz, filepath.Join("node_modules", name))
}

// untgz unpacks a package tarball's package/ files into dir.
func untgz(tgz []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(h.Name, "package/")
		if !ok || h.Typeflag != tar.TypeReg || strings.Contains(rel, "..") {
			continue
		}
		if err := writeFile(filepath.Join(dir, rel), tr); err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pip stands in for `pip install [--user] [--target DIR] [-r FILE] NAME...`: the
// project's page on the index (PIP_INDEX_URL, else pypi.org/simple), its
// last wheel from wherever the page links it (files.pythonhosted.org),
// checked against the link's sha256, unpacked into the interpreter's
// site-packages, or the user's when that is not writable (a toolchain
// mounted read-only), as pip does.
func pip(args []string) int {
	site := pipSite()
	if len(args) == 1 && args[0] == "--version" {
		fmt.Printf("pip 24.0 from %s/pip (python %s)\n", site, pyVersion())
		return 0
	}
	if len(args) == 0 || args[0] != "install" {
		fmt.Fprintln(os.Stderr, "ERROR: the stand-in knows install and --version")
		return 1
	}
	var names []string
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--user":
			site = userSite()
		case "--target", "-t":
			i++
			site = args[i]
		case "-r", "--requirement":
			i++
			b, err := os.ReadFile(args[i])
			if err != nil {
				fmt.Printf("ERROR: Could not open requirements file: %v\n", err)
				return 1
			}
			names = append(names, strings.Fields(string(b))...)
		default:
			names = append(names, args[i])
		}
	}
	if err := os.MkdirAll(site, 0o755); err != nil || syscall.Access(site, 2) != nil {
		fmt.Println("Defaulting to user installation because normal site-packages is not writeable")
		site = userSite()
	}
	for _, n := range names {
		if err := pipInstall(n, site); err != nil {
			fmt.Printf("ERROR: %v\n", err)
			return 1
		}
		fmt.Printf("Successfully installed %s into %s\n", n, site)
	}
	return 0
}

var wheelLink = regexp.MustCompile(`href="([^"#]+\.whl)#sha256=([0-9a-f]{64})"`)

func pipInstall(name, site string) error {
	index := strings.TrimSuffix(os.Getenv("PIP_INDEX_URL"), "/")
	if index == "" {
		index = "https://pypi.org/simple"
	}
	page, err := fetch(index + "/" + name + "/")
	if err != nil {
		//lint:ignore ST1005 pip's own words, as pip prints them
		return fmt.Errorf("Could not find a version that satisfies the requirement %s (%v)", name, err)
	}
	links := wheelLink.FindAllStringSubmatch(string(page), -1)
	if len(links) == 0 {
		//lint:ignore ST1005 pip's own words, as pip prints them
		return fmt.Errorf("No matching distribution found for %s", name)
	}
	link := links[len(links)-1]
	whl, err := fetch(link[1])
	if err != nil {
		//lint:ignore ST1005 pip's own words, as pip prints them
		return fmt.Errorf("Could not install packages due to an OSError: %v", err)
	}
	if sum := sha256.Sum256(whl); hex.EncodeToString(sum[:]) != link[2] {
		return fmt.Errorf("THESE PACKAGES DO NOT MATCH THE HASHES: %s", link[1])
	}
	zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
	if err != nil {
		return err
	}
	for _, f := range zr.File {
		if strings.Contains(f.Name, "..") || strings.HasSuffix(f.Name, "/") {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		err = writeFile(filepath.Join(site, f.Name), r)
		r.Close()
		if err != nil {
			//lint:ignore ST1005 pip's own words, as pip prints them
			return fmt.Errorf("Could not install packages due to an OSError: %v", err)
		}
	}
	return nil
}

// pyVersion is X.Y of the toolchain the stand-in sits in
// (.../versions/3.12.1/bin/pip), else 3.
func pyVersion() string {
	exe, _ := os.Executable()
	v := filepath.Base(filepath.Dir(filepath.Dir(exe)))
	if parts := strings.Split(v, "."); len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return "3"
}

func pipSite() string {
	exe, _ := os.Executable()
	return filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", "python"+pyVersion(), "site-packages")
}

func userSite() string {
	return filepath.Join(homeDir(), ".local/lib", "python"+pyVersion(), "site-packages")
}
