package toolrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
)

// maxListEntries bounds fs.list.
const maxListEntries = 256

var FsListTool = &BuiltinTool{
	Name:        "fs.list",
	Description: "List a directory without following symlinks: name, type, size and mode of up to 256 entries, sorted by name.",
	Cap:         "fs.list",
	Grants:      readersGrants,
	Bare:        "path",
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"fs.list input",` +
		`"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"directory to list (default: the working directory)"},` +
		`"max_entries":{"type":"integer","minimum":1,"maximum":256}},"additionalProperties":false}`,
	CLI: func(args []string, _ io.Reader) (map[string]any, error) {
		switch len(args) {
		case 0:
			return map[string]any{"path": "."}, nil
		case 1:
			return map[string]any{"path": args[0]}, nil
		}
		return nil, InputErr("usage: fs.list [PATH]")
	},
	Run: fsList,
}

// fileEntry is one fs.list / fs.stat record.
type fileEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
}

func entryOf(name string, st *unix.Stat_t) fileEntry {
	typ := "other"
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		typ = "directory"
	case unix.S_IFREG:
		typ = "file"
	case unix.S_IFLNK:
		typ = "symlink"
	}
	return fileEntry{Name: name, Type: typ, Size: st.Size, Mode: st.Mode & 0o7777}
}

func fsList(c *ToolCall) error {
	path, ok := c.stringField("path")
	if !ok {
		path = "."
	}
	limit := maxListEntries
	if v, ok := c.Input["max_entries"]; ok {
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil || n < 1 || n > maxListEntries {
			return InputErr("max_entries must be an integer from 1 to %d", maxListEntries)
		}
		limit = n
	}
	dir, err := fsops.OpenDirNoFollow(path)
	if err != nil {
		if err == unix.ELOOP {
			return ToolErr(unix.ELOOP, cli.Failure, "%s: is a symlink (not followed)", path)
		}
		return FsErr(&os.PathError{Op: "open", Path: path, Err: err})
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return FsErr(err)
	}
	sort.Strings(names)
	truncated := len(names) > limit
	if truncated {
		names = names[:limit]
	}
	entries := make([]fileEntry, 0, len(names))
	for _, name := range names {
		st, err := fsops.LstatAt(dir, name)
		if err != nil {
			continue // removed while listing
		}
		entries = append(entries, entryOf(name, &st))
	}
	b, _ := json.Marshal(entries)
	c.Out.Write(append(b, '\n'))
	if truncated && !c.Native {
		cli.Errorf(c.Env.Stderr, "fs.list", "%s: listing truncated at %d entries", path, limit)
	}
	return nil
}
