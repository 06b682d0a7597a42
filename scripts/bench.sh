#!/bin/sh
# bench.sh CTX - benchmarks against baselines in the same run, as ratios.
# Needs hyperfine; busybox and bwrap baselines are used when installed.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
command -v hyperfine >/dev/null || { echo "bench.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${BENCH_OUT:-$PWD/bench-out}
mkdir -p "$out"
runs=${BENCH_RUNS:-500}

"$ctx" bootstrap --root "$work/r" >/dev/null
printf 'hello, world\n' >"$work/small.txt"
cd "$work"

echo "== cold start: fs.read of a small file vs /bin/cat and busybox cat"
set -- "/bin/cat small.txt" "$work/r/tool/fs.read small.txt"
if command -v busybox >/dev/null; then set -- "$@" "busybox cat small.txt"; fi
hyperfine -N --warmup 50 --runs "$runs" --export-json "$out/fsread.json" "$@" >/dev/null
ratio() { # ratio JSON CMD-INDEX BASE-INDEX
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; a=r[int(sys.argv[2])]; b=r[int(sys.argv[3])]
print("%-40s median %.3f ms  %.2fx of %s" % (a["command"][:40], a["median"]*1e3, a["median"]/b["median"], b["command"].split()[0]))' "$@"
}
ratio "$out/fsread.json" 0 0
ratio "$out/fsread.json" 1 0
if command -v busybox >/dev/null; then ratio "$out/fsread.json" 2 0; ratio "$out/fsread.json" 1 2; fi

echo "== binary size"
echo "$(wc -c <"$ctx") bytes ($(awk "BEGIN{printf \"%.2f\", $(wc -c <"$ctx")/1048576}") MiB; budget 8 MiB)"

echo "== tsh one-shot overhead: tsh fs.read vs fs.read executed directly, both in an agent context"
"$ctx" agent new --root "$work/r" bencher --tool fs.read >/dev/null 2>&1 || true
printf 'allow bencher_t tool:fs.read execute\n' >>"$work/r/tool/fs.read.d/policy"
export CTX_ROOT="$work/r" CTX_AGENT=bencher CTX_SESSION=default CTX_RUN_ID=bench
hyperfine -N --warmup 30 --runs "$runs" --export-json "$out/tsh.json" \
	"$work/r/tool/fs.read small.txt" "$work/r/bin/tsh fs.read small.txt" >/dev/null
unset CTX_ROOT CTX_AGENT CTX_SESSION CTX_RUN_ID
ratio "$out/tsh.json" 1 0

if command -v bwrap >/dev/null && command -v python3 >/dev/null && "$ctx" agent start --root "$work/r" coder -- /bin/true 2>/dev/null; then
	echo "== sandbox start to exec of /bin/true: ctx agent start vs bwrap given the same mounts"
	mkdir -p "$work/ws" "$work/files"
	cd "$work/ws"
	# The same sandbox for bwrap: ctx's own plan (--plan), translated op by
	# op into bwrap options; files the plan writes are bound from copies.
	"$ctx" agent start --root "$work/r" coder --plan -- /bin/true >"$work/plan.json"
	python3 - "$work/plan.json" "$work/files" >"$work/bwrap.args" <<'PY'
import json, os, sys
plan = json.load(open(sys.argv[1])); files = sys.argv[2]; args = []; n = 0
for op in plan["ops"]:
    k, t, s = op["kind"], op.get("target", ""), op.get("source", "")
    if t.startswith("/dev/") and k != "tmpfs": continue       # --dev makes the same /dev
    if k == "bind":
        if op.get("optional") and not os.path.exists(s): continue
        if not os.path.exists(s): s = files                    # the run's /mnt/proc, gone after --plan
        args += ["--ro-bind" if op.get("ro") else "--bind", s, t]
    elif k == "tmpfs": args += ["--dev", t] if t == "/dev" else ["--tmpfs", t]
    elif k == "proc": args += ["--proc", t]
    elif k == "dir": args += ["--dir", t]
    elif k == "symlink": args += ["--symlink", s, t]
    elif k == "file":
        n += 1; p = os.path.join(files, str(n)); open(p, "wb").write(bytes(op.get("data") and __import__("base64").b64decode(op["data"]) or b""))
        args += ["--ro-bind", p, t]
    elif k == "mask" and os.path.exists(t): args += ["--ro-bind", "/dev/null", t] if os.path.isfile(t) else ["--tmpfs", t, "--remount-ro", t]
    elif k == "readonly" and t != "/": args += ["--remount-ro", t]
args += ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", plan["cwd"], "/bin/true"]
print(" ".join(args))
PY
	hyperfine -N --warmup 10 --runs "$((runs / 5))" --export-json "$out/sandbox.json" \
		"bwrap $(cat "$work/bwrap.args")" "$ctx agent start --root $work/r coder -- /bin/true" >/dev/null
	echo "bwrap given $(grep -o -- '--ro-bind\|--bind\|--tmpfs\|--symlink\|--dir\|--remount-ro' "$work/bwrap.args" | wc -l) mount options"
	ratio "$out/sandbox.json" 1 0
	cd "$work"
fi

if "$ctx" agent start --root "$work/r" coder -- /bin/true 2>/dev/null; then
	echo "== brokered tool call vs the same tool executed directly, in one sandbox (200 calls each, median of 5)"
	mkdir -p "$work/ws" && cd "$work/ws" && cp "$work/small.txt" .
	"$ctx" agent start --root "$work/r" coder -- sh -c '
		for round in 1 2 3 4 5; do
			s=$(date +%s%N); i=0; while [ $i -lt 200 ]; do /mnt/tools/fs.read small.txt >/dev/null; i=$((i+1)); done
			b=$(date +%s%N); i=0; while [ $i -lt 200 ]; do CTX_BROKERED=direct /mnt/tools/fs.read small.txt >/dev/null; i=$((i+1)); done
			d=$(date +%s%N); echo "$(( (b-s)/200000 )) $(( (d-b)/200000 ))"
		done' | sort -n | sed -n 3p | awk '{printf "brokered %.3f ms  direct %.3f ms  %.2fx of direct\n", $1/1000, $2/1000, $1/$2}'
	cd "$work"
fi

echo "== Go benchmarks (each against its own baseline in the same run)"
cd "$repo"
CGO_ENABLED=0 go test -run '^$' -bench 'PolicyParse|PolicyDecision|CacheHitRate|OneShot|JobCycle|Workers|PTYThroughput|Validate|Compile' \
	-benchtime "${BENCH_TIME:-1s}" ./policy/... ./applets/tsh/ ./fsops/queue/ ./ptyterm/ 2>&1 | grep -E '^(Benchmark|ok|---)' || true
exit 0
