#!/bin/sh
# bench.sh CTX - benchmarks against baselines in the same run, as ratios.
# Needs hyperfine; busybox and bwrap baselines are used when installed.
set -eu
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

for extra in "$(dirname "$0")"/bench-*.sh; do
	[ -x "$extra" ] && "$extra" "$ctx" "$work" "$out"
done
exit 0
