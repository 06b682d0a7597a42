package object

import (
	"ctx/policy"
	"encoding/json"
	"fmt"
)

// ReceiptName is the install receipt inside an object's control directory.
const ReceiptName = ".cortexfs-receipt.json"

// maxReceiptSize bounds a receipt read.
const maxReceiptSize = 16 << 10

// Receipt schemas: v1 for objects installed from v1 manifests, v2 for v2.
const (
	ReceiptV1 = "cortexfs.object-install/v1"
	ReceiptV2 = "cortexfs.object-install/v2"
)

// Receipt records what install published, so inspect and uninstall can
// tell a managed object from anything else that carries its name.
type Receipt struct {
	Schema       string `json:"schema"`
	ObjectSchema string `json:"object_schema"`
	Class        string `json:"class"`
	Name         string `json:"name"`
	Tier         string `json:"tier"`
	// v2 only.
	ObjectVersion       string `json:"object_version,omitempty"`
	CortexFSRequirement string `json:"cortexfs_requirement,omitempty"`
	Executable          struct {
		DevIno
		SHA256 string `json:"sha256"`
	} `json:"executable"`
	Control DevIno `json:"control"`
}

// Encode renders the receipt as one JSON line.
func (r *Receipt) Encode() []byte {
	b, _ := json.Marshal(r)
	return append(b, '\n')
}

// ParseReceipt parses a receipt strictly: exact field set, no duplicates.
func ParseReceipt(data []byte) (*Receipt, error) {
	top, err := policy.StrictObject(data)
	if err != nil {
		return nil, err
	}
	r := &Receipt{}
	names := []string{"schema", "object_schema", "class", "name", "tier", "executable", "control"}
	if err := policy.OnlyFields(top, "", append(names, "object_version", "cortexfs_requirement")...); err != nil {
		return nil, err
	}
	for _, k := range names {
		if _, ok := top[k]; !ok {
			return nil, fmt.Errorf("missing field %q", k)
		}
	}
	for k, dst := range map[string]*string{"schema": &r.Schema, "object_schema": &r.ObjectSchema, "class": &r.Class, "name": &r.Name, "tier": &r.Tier} {
		if *dst, err = policy.StringField(top[k], k); err != nil {
			return nil, err
		}
	}
	switch {
	case r.Schema == ReceiptV1 && r.ObjectSchema == SchemaV1:
		if _, ok := top["object_version"]; ok {
			return nil, fmt.Errorf("object_version: not allowed in %s", ReceiptV1)
		}
		if _, ok := top["cortexfs_requirement"]; ok {
			return nil, fmt.Errorf("cortexfs_requirement: not allowed in %s", ReceiptV1)
		}
	case r.Schema == ReceiptV2 && r.ObjectSchema == SchemaV2:
		for k, dst := range map[string]*string{"object_version": &r.ObjectVersion, "cortexfs_requirement": &r.CortexFSRequirement} {
			raw, ok := top[k]
			if !ok {
				return nil, fmt.Errorf("missing field %q", k)
			}
			if *dst, err = policy.StringField(raw, k); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unsupported receipt schema %q for object schema %q", r.Schema, r.ObjectSchema)
	}
	ex, err := policy.StrictObject(top["executable"])
	if err != nil {
		return nil, fmt.Errorf("executable: %v", err)
	}
	if err := policy.OnlyFields(ex, "executable.", "dev", "ino", "sha256"); err != nil {
		return nil, err
	}
	if r.Executable.DevIno, err = parseDevIno(ex, "executable."); err != nil {
		return nil, err
	}
	if raw, ok := ex["sha256"]; !ok {
		return nil, fmt.Errorf("missing field \"executable.sha256\"")
	} else if r.Executable.SHA256, err = policy.StringField(raw, "executable.sha256"); err != nil {
		return nil, err
	} else if !isLowerHex64(r.Executable.SHA256) {
		return nil, fmt.Errorf("executable.sha256 must be 64 lowercase hex digits")
	}
	ctl, err := policy.StrictObject(top["control"])
	if err != nil {
		return nil, fmt.Errorf("control: %v", err)
	}
	if err := policy.OnlyFields(ctl, "control.", "dev", "ino"); err != nil {
		return nil, err
	}
	if r.Control, err = parseDevIno(ctl, "control."); err != nil {
		return nil, err
	}
	return r, nil
}

func parseDevIno(m map[string]json.RawMessage, prefix string) (DevIno, error) {
	var d DevIno
	var err error
	for k, dst := range map[string]*uint64{"dev": &d.Dev, "ino": &d.Ino} {
		raw, ok := m[k]
		if !ok {
			return d, fmt.Errorf("missing field %q", prefix+k)
		}
		if *dst, err = uintField(raw, prefix+k); err != nil {
			return d, err
		}
	}
	return d, nil
}
