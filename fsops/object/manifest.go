package object

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"ctx/fsops"
	"ctx/policy"
)

// Manifest schema identifiers.
const (
	SchemaV1 = "cortexfs.object/v1"
	SchemaV2 = "cortexfs.object/v2"
)

// MaxManifestSize bounds a manifest file.
const MaxManifestSize = 1 << 20

// Manifest is a validated object manifest: one tool or agent, its artifact
// and its control files.
type Manifest struct {
	Schema      string // SchemaV1 or SchemaV2
	Version     string // v2: the object's SemVer version
	Requirement string // v2: compatibility.cortexfs
	Class       string // "tool" or "agent"
	Name        string
	ExecPath    string // executable.path as written
	SHA256      string // executable.sha256, lowercased
	Controls    map[string]string

	// Dir is the directory relative executable paths resolve against; set
	// by ReadManifest to the manifest's own directory.
	Dir string
}

// ArtifactPath is the executable's path with a relative path resolved
// against the manifest's directory.
func (m *Manifest) ArtifactPath() string {
	if filepath.IsAbs(m.ExecPath) || m.Dir == "" {
		return m.ExecPath
	}
	return filepath.Join(m.Dir, m.ExecPath)
}

// ReadManifest reads and validates the manifest at path: a regular file
// (the final component is not followed), at most 1 MiB, JSON.
func ReadManifest(path string) (*Manifest, error) {
	data, err := fsops.ReadRegular(path, MaxManifestSize)
	if err != nil {
		return nil, invalidErr(err, "manifest")
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, invalidErr(err, "manifest %s", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, invalidErr(err, "manifest %s", path)
	}
	m.Dir = filepath.Dir(abs)
	return m, nil
}

// ParseManifest parses and validates manifest bytes: unknown or duplicate
// fields at any level, a wrong schema id, v1/v2 field rules, an invalid
// name, executable or control are all errors naming the field. The
// artifact itself is not looked at (see CheckArtifact).
func ParseManifest(data []byte) (*Manifest, error) {
	top, err := policy.StrictObject(data)
	if err != nil {
		return nil, err
	}
	m := &Manifest{}
	raw, ok := top["schema"]
	if !ok {
		return nil, fmt.Errorf("missing field \"schema\"")
	}
	if m.Schema, err = policy.StringField(raw, "schema"); err != nil {
		return nil, err
	}
	if m.Schema != SchemaV1 && m.Schema != SchemaV2 {
		return nil, fmt.Errorf("unsupported object manifest schema %q (want %s or %s)", m.Schema, SchemaV2, SchemaV1)
	}
	if err := policy.OnlyFields(top, "", "schema", "version", "compatibility", "class", "name", "executable", "controls"); err != nil {
		return nil, err
	}
	if err := m.parseVersioning(top); err != nil {
		return nil, err
	}
	for _, k := range []string{"class", "name", "executable", "controls"} {
		if _, ok := top[k]; !ok {
			return nil, fmt.Errorf("missing field %q", k)
		}
	}
	if m.Class, err = policy.StringField(top["class"], "class"); err != nil {
		return nil, err
	}
	switch m.Class {
	case "tool", "agent":
	case "model":
		return nil, fmt.Errorf("class: model installation is not supported")
	default:
		return nil, fmt.Errorf("class %q is not tool or agent", m.Class)
	}
	if m.Name, err = policy.StringField(top["name"], "name"); err != nil {
		return nil, err
	}
	if err := policy.ValidName(m.Name); err != nil {
		return nil, fmt.Errorf("name: %v", err)
	}
	if err := m.parseExecutable(top["executable"]); err != nil {
		return nil, err
	}
	if err := m.parseControls(top["controls"]); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manifest) parseVersioning(top map[string]json.RawMessage) error {
	_, hasVersion := top["version"]
	_, hasCompat := top["compatibility"]
	if m.Schema == SchemaV1 {
		// Present even as null is refused: v1 has no such fields, and
		// ignoring them would let a v2 manifest pass as v1 unchecked.
		if hasVersion {
			return fmt.Errorf("version: not allowed in %s", SchemaV1)
		}
		if hasCompat {
			return fmt.Errorf("compatibility: not allowed in %s", SchemaV1)
		}
		return nil
	}
	if !hasVersion {
		return fmt.Errorf("missing field \"version\" (required in %s)", SchemaV2)
	}
	if !hasCompat {
		return fmt.Errorf("missing field \"compatibility\" (required in %s)", SchemaV2)
	}
	var err error
	if m.Version, err = policy.StringField(top["version"], "version"); err != nil {
		return err
	}
	if _, err := ParseVersion(m.Version); err != nil {
		return fmt.Errorf("version: %v", err)
	}
	compat, err := policy.StrictObject(top["compatibility"])
	if err != nil {
		return fmt.Errorf("compatibility: %v", err)
	}
	if err := policy.OnlyFields(compat, "compatibility.", "cortexfs"); err != nil {
		return err
	}
	raw, ok := compat["cortexfs"]
	if !ok {
		return fmt.Errorf("missing field \"compatibility.cortexfs\"")
	}
	if m.Requirement, err = policy.StringField(raw, "compatibility.cortexfs"); err != nil {
		return err
	}
	req, err := ParseRequirement(m.Requirement)
	if err != nil {
		return fmt.Errorf("compatibility.cortexfs: %v", err)
	}
	own, _ := ParseVersion(CortexFSVersion)
	if !req.Matches(own) {
		return fmt.Errorf("compatibility.cortexfs %q does not match this CortexFS version %s", m.Requirement, CortexFSVersion)
	}
	return nil
}

func (m *Manifest) parseExecutable(raw json.RawMessage) error {
	ex, err := policy.StrictObject(raw)
	if err != nil {
		return fmt.Errorf("executable: %v", err)
	}
	if err := policy.OnlyFields(ex, "executable.", "path", "sha256"); err != nil {
		return err
	}
	for _, k := range []string{"path", "sha256"} {
		if _, ok := ex[k]; !ok {
			return fmt.Errorf("missing field \"executable.%s\"", k)
		}
	}
	if m.ExecPath, err = policy.StringField(ex["path"], "executable.path"); err != nil {
		return err
	}
	if m.ExecPath == "" || strings.ContainsRune(m.ExecPath, 0) {
		return fmt.Errorf("executable.path must be a non-empty path")
	}
	sum, err := policy.StringField(ex["sha256"], "executable.sha256")
	if err != nil {
		return err
	}
	m.SHA256 = strings.ToLower(sum)
	if !isLowerHex64(m.SHA256) {
		return fmt.Errorf("executable.sha256 must be 64 hex digits")
	}
	return nil
}

func (m *Manifest) parseControls(raw json.RawMessage) error {
	ctl, err := policy.StrictObject(raw)
	if err != nil {
		return fmt.Errorf("controls: %v", err)
	}
	allowed, required := AllowedControls(m.Class)
	m.Controls = make(map[string]string, len(ctl))
	names := make([]string, 0, len(ctl))
	for k := range ctl {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !contains(allowed, k) {
			return fmt.Errorf("controls.%s: unknown or runtime-owned control for class %s", k, m.Class)
		}
		v, err := policy.StringField(ctl[k], "controls."+k)
		if err != nil {
			return err
		}
		if len(v) > fsops.ControlLimit {
			return fmt.Errorf("controls.%s: longer than %d bytes", k, fsops.ControlLimit)
		}
		if err := ValidateControl(m.Class, k, []byte(v)); err != nil {
			return fmt.Errorf("controls.%s: %v", k, err)
		}
		m.Controls[k] = v
	}
	for _, k := range required {
		if _, ok := m.Controls[k]; !ok {
			return fmt.Errorf("missing required control \"controls.%s\" for class %s", k, m.Class)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Encode renders a manifest as indented JSON with the fields in their
// documented order and the controls sorted by name. It does not validate;
// ParseManifest(m.Encode()) does.
func (m *Manifest) Encode() []byte {
	var b bytes.Buffer
	q := func(s string) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(buf.String(), "\n")
	}
	b.WriteString("{\n")
	b.WriteString(`  "schema": ` + q(m.Schema) + ",\n")
	if m.Schema == SchemaV2 {
		b.WriteString(`  "version": ` + q(m.Version) + ",\n")
		b.WriteString(`  "compatibility": {"cortexfs": ` + q(m.Requirement) + "},\n")
	}
	b.WriteString(`  "class": ` + q(m.Class) + ",\n")
	b.WriteString(`  "name": ` + q(m.Name) + ",\n")
	b.WriteString(`  "executable": {"path": ` + q(m.ExecPath) + `, "sha256": ` + q(m.SHA256) + "},\n")
	b.WriteString(`  "controls": {`)
	names := make([]string, 0, len(m.Controls))
	for k := range m.Controls {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    " + q(k) + ": " + q(m.Controls[k]))
	}
	if len(names) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("}\n}\n")
	return b.Bytes()
}
