#!/bin/sh
# demo.sh CTX - the main job on a built-in default: bootstrap a root in a
# user-writable place, start the reference agent coder in a sandbox on the
# current directory (interactive on a terminal, a short scripted session
# otherwise), and show the events the run left.
set -eu
ctx=$1
root=${CTX_DEMO_ROOT:-${XDG_DATA_HOME:-$HOME/.local/share}/ctx-demo}
say() { printf '\n== %s\n' "$*"; }

say "bootstrap $root"
"$ctx" bootstrap --root "$root" | tail -n 1
"$ctx" doctor --root "$root" -q && echo "ctx doctor: every check ok"

if [ -t 0 ] && [ -t 1 ]; then
	say "ctx agent start coder: tsh in the sandbox at /workspace (type help; exit to leave)"
	"$ctx" agent start --root "$root" coder || true
else
	say "a scripted session of coder in the sandbox (tsh reading commands from a pipe)"
	printf '%s\n' 'tools' 'which fs.read' 'fs.stat README.md' 'shell.exec pwd; id -u; ls /mnt/tools | head -n 3' \
		'fs.write /etc/passwd nope' 'exit' | "$ctx" agent start --root "$root" coder || true
	say "the architect (perm r--) cannot even see a writing tool"
	"$ctx" agent start --root "$root" architect -- tsh fs.write notes.txt hello || true
fi

# The agent's own uid names its home (an unprivileged uid of its own in a
# tree root bootstrapped).
uid=$("$ctx" cat --root "$root" agent/coder.d/uid)
say "the session's events ($root/home/$uid/agent/coder/session/default/events.jsonl)"
tail -n 8 "$root/home/$uid/agent/coder/session/default/events.jsonl"
say "ctx agent ps"
"$ctx" agent ps --root "$root"
