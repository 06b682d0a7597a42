#!/bin/sh
# demo.sh CTX - the main job on a built-in default: bootstrap a root in a
# user-writable place, start the reference agent coder in a sandbox on the
# current directory (interactive on a terminal, a short scripted session
# otherwise), and show the events the run left. Every command is printed
# before its output; refusals the demo shows on purpose are checked to be
# refusals, and anything else that fails stops it. The last line is ok.
set -eu
ctx=$1
root=${CTX_DEMO_ROOT:-${XDG_DATA_HOME:-$HOME/.local/share}/ctx-demo}
say() { printf '\n== %s\n' "$*"; }

# show prints a command as a person would type it (ctx for the binary's
# path, arguments with blanks quoted).
show() {
	out='$'
	for a in "$@"; do
		[ "$a" = "$ctx" ] && a=ctx
		case $a in
		*[!A-Za-z0-9_./:=@+-]* | '') a="'$a'" ;;
		esac
		out="$out $a"
	done
	printf '%s\n' "$out"
}

# run prints a command, then runs it; a failure ends the demo.
run() {
	show "$@"
	"$@"
}

# refused prints a command, runs it, and checks it exits with exactly the
# status given first: the demo shows a refusal, not a breakage.
refused() {
	want=$1
	shift
	show "$@"
	set +e
	"$@"
	got=$?
	set -e
	if [ "$got" != "$want" ]; then
		echo "demo: expected exit $want, got $got" >&2
		exit 1
	fi
	echo "(refused: exit $got, as it should be)"
}

say "bootstrap $root and check it"
show "$ctx" bootstrap --root "$root"
"$ctx" bootstrap --root "$root" | tail -n 1
run "$ctx" doctor --root "$root"

if [ -t 0 ] && [ -t 1 ]; then
	say "ctx agent start coder: tsh in the sandbox at /workspace (type help; exit to leave)"
	run "$ctx" agent start --root "$root" coder || true
else
	say "a scripted session of coder in the sandbox (tsh -x reading commands from a pipe)"
	show "$ctx" agent start --root "$root" coder -- tsh -x
	printf '%s\n' 'tools fs' 'which fs.read' 'fs.stat README.md' 'fs.write /etc/passwd nope' \
		'shell.exec pwd; id -u' 'exit' |
		"$ctx" agent start --root "$root" coder -- tsh -x
	say "the architect (perm r--) cannot even see a writing tool"
	refused 13 "$ctx" agent start --root "$root" architect -- tsh fs.write notes.txt hello
fi

# The agent's own uid names its home (an unprivileged uid of its own in a
# tree root bootstrapped).
uid=$("$ctx" cat --root "$root" agent/coder.d/uid)
events=$root/home/$uid/agent/coder/session/default/events.jsonl
say "the session's events ($events)"
run tail -n 8 "$events"
say "who ran"
run "$ctx" agent ps --root "$root"
echo ok
