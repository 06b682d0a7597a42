#!/bin/sh
# demo.sh CTX - the main job on a built-in default: bootstrap a root in a
# user-writable place, run tool calls, and show the events they logged.
set -eu
ctx=$1
root=${CTX_DEMO_ROOT:-${XDG_DATA_HOME:-$HOME/.local/share}/ctx-demo}
say() { printf '\n== %s\n' "$*"; }

say "bootstrap $root"
"$ctx" bootstrap --root "$root" | tail -n 1

say "a tool call: $root/tool/fs.read '{\"path\":\"README.md\"}'"
"$root/tool/fs.read" '{"path":"README.md"}' | head -n 5

say "another: echo '{\"cmd\":\"pwd\"}' | $root/tool/shell.exec"
echo '{"cmd":"pwd"}' | "$root/tool/shell.exec"

say "the events they logged"
tail -n 1 "$root/tool/fs.read.d/log"
tail -n 1 "$root/tool/shell.exec.d/log"

say "ctx doctor"
"$ctx" doctor --root "$root" -q && echo "every check ok"
