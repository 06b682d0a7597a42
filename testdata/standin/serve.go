package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// standinHosts are the names the stand-in server answers for, one
// certificate for all, signed by a CA made at start (its PEM goes to
// CAFILE, for the clients' SSL_CERT_FILE).
var standinHosts = []string{"api.anthropic.com", "api.openai.com", "api.github.com", "registry.npmjs.org",
	"pypi.org", "files.pythonhosted.org", "proxy.golang.org", "sum.golang.org"}

// serve: `serve ADDR CAFILE LOG READY`, HTTPS on ADDR for every stand-in
// host, each request one line in LOG ("HOST METHOD PATH STATUS"), READY
// written once it listens. The model APIs take the keys in
// STANDIN_ANTHROPIC_KEY and STANDIN_OPENAI_KEY and refuse any other.
func serve(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: ctx-standin serve ADDR CAFILE LOG READY")
		return 2
	}
	cert, err := makeCert(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	l, err := tls.Listen("tcp", args[0], &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	log, err := os.OpenFile(args[2], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	os.WriteFile(args[3]+".tmp", []byte(args[0]+"\n"), 0o644)
	os.Rename(args[3]+".tmp", args[3])
	// the server goes with the process that started it, however that ends
	parent := os.Getppid()
	go func() {
		for os.Getppid() == parent {
			time.Sleep(200 * time.Millisecond)
		}
		os.Exit(0)
	}()
	var mu sync.Mutex
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, ctype, body := route(r)
		mu.Lock()
		fmt.Fprintf(log, "%s %s %s %d\n", r.Host, r.Method, r.URL.Path, status)
		mu.Unlock()
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write(body)
	}))
	return 0
}

func route(r *http.Request) (int, string, []byte) {
	const js = "application/json"
	host, path := r.Host, r.URL.Path
	switch {
	case host == "api.anthropic.com" && r.Method == "POST" && path == "/v1/messages":
		if k := os.Getenv("STANDIN_ANTHROPIC_KEY"); k == "" || r.Header.Get("x-api-key") != k {
			return 401, js, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		}
		return 200, js, []byte(`{"type":"message","content":[{"type":"text","text":"hello from the stand-in api.anthropic.com"}]}`)
	case host == "api.openai.com" && r.Method == "POST" && path == "/v1/responses":
		if k := os.Getenv("STANDIN_OPENAI_KEY"); k == "" || r.Header.Get("Authorization") != "Bearer "+k {
			return 401, js, []byte(`{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`)
		}
		return 200, js, []byte(`{"output_text":"hello from the stand-in api.openai.com"}`)
	case host == "api.github.com" && path == "/repos/openai/codex/releases/latest":
		return 200, js, []byte(`{"tag_name":"rust-v0.171.0"}`)
	case host == "registry.npmjs.org" && path == "/left-pad":
		sum := sha512.Sum512(npmTarball)
		return 200, js, []byte(`{"name":"left-pad","dist-tags":{"latest":"1.3.0"},"versions":{"1.3.0":{"name":"left-pad","version":"1.3.0",` +
			`"dist":{"tarball":"https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz","integrity":"sha512-` + base64.StdEncoding.EncodeToString(sum[:]) + `"}}}}`)
	case host == "registry.npmjs.org" && path == "/left-pad/-/left-pad-1.3.0.tgz":
		return 200, "application/octet-stream", npmTarball
	case host == "pypi.org" && path == "/simple/greet/":
		sum := sha256.Sum256(wheel)
		return 200, "text/html", []byte(`<!DOCTYPE html><html><body><a href="https://files.pythonhosted.org/packages/00/11/greet-1.0-py3-none-any.whl#sha256=` +
			hex.EncodeToString(sum[:]) + `">greet-1.0-py3-none-any.whl</a></body></html>`)
	case host == "files.pythonhosted.org" && path == "/packages/00/11/greet-1.0-py3-none-any.whl":
		return 200, "application/octet-stream", wheel
	case host == "proxy.golang.org" && strings.HasPrefix(path, "/"+goModule+"/@v/"):
		return goProxy(strings.TrimPrefix(path, "/"+goModule+"/@v/"))
	}
	return 404, "text/plain", []byte("not found\n")
}

// makeCert makes a CA, writes its PEM to caFile, and returns a
// certificate for every stand-in host signed by it.
func makeCert(caFile string) (tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctx-standin test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: standinHosts[0]},
		DNSNames: standinHosts, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}, nil
}

// The stand-in packages: left-pad on npm, greet on PyPI.
var (
	npmTarball = makeTarball(map[string]string{
		"package/package.json": `{"name":"left-pad","version":"1.3.0","main":"index.js"}` + "\n",
		"package/index.js":     "module.exports = (s, n) => String(s).padStart(n);\n",
	})
	wheel = makeZip("", map[string]string{
		"greet/__init__.py":                 "def hello():\n    return 'hello from greet'\n",
		"greet-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: greet\nVersion: 1.0\n",
		"greet-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"greet-1.0.dist-info/top_level.txt": "greet\n",
	})
)

func sortedKeys(files map[string]string) []string {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func makeTarball(files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range sortedKeys(files) {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		io.WriteString(tw, files[n])
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func makeZip(prefix string, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range sortedKeys(files) {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: prefix + n, Method: zip.Deflate})
		io.WriteString(w, files[n])
	}
	zw.Close()
	return buf.Bytes()
}
