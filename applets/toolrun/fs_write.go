package toolrun

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
)

// maxWriteContent bounds fs.write content: 1 MiB.
const maxWriteContent = 1 << 20

var FsWriteTool = &BuiltinTool{
	Name:        "fs.write",
	Description: "Write one UTF-8 text file atomically (temp file, fsync, rename); a symlink is refused, never written through.",
	Cap:         "fs.write",
	Grants:      writersGrants,
	Schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"fs.write input",` +
		`"type":"object","properties":{"path":{"type":"string","minLength":1},"content":{"type":"string"}},` +
		`"required":["path","content"],"additionalProperties":false}`,
	CLI: func(args []string, stdin io.Reader) (map[string]any, error) {
		switch {
		case len(args) == 0:
			return nil, InputErr("usage: fs.write PATH [TEXT...] (or JSON input)")
		case len(args) > 1:
			return map[string]any{"path": args[0], "content": strings.Join(args[1:], " ")}, nil
		}
		b, err := readStdin(stdin, maxWriteContent)
		if err != nil {
			return nil, err
		}
		return map[string]any{"path": args[0], "content": string(b)}, nil
	},
	Run: fsWrite,
}

func fsWrite(c *ToolCall) error {
	path, _ := c.stringField("path")
	content, ok := c.stringField("content")
	if !ok {
		return InputErr("content must be a string")
	}
	if len(content) > maxWriteContent {
		return ToolErr(syscall.EFBIG, cli.Usage, "content larger than %d bytes", maxWriteContent)
	}
	if err := writeKeepingMode(path, []byte(content)); err != nil {
		return FsErr(err)
	}
	_, err := io.WriteString(c.Out, "written\n")
	return err
}

// writeKeepingMode atomically replaces path, keeping the mode of the file it
// replaces (0644 for a new file).
func writeKeepingMode(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().IsRegular() {
			mode = st.Mode().Perm()
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsops.WriteAtomic(path, data, mode)
}
