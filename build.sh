#!/bin/sh
# build.sh - build, test, demo and benchmark ctx.
#
#   ./build.sh            build the static binary ./ctx and print its size
#   ./build.sh test       the whole test suite (what CI runs)
#   ./build.sh demo       the main job on a built-in default (see README)
#   ./build.sh bench      benchmarks against baselines, as ratios
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/ctx}

build() {
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -buildid=' -o "$OUT" .
	check_static "$OUT"
	echo "build.sh: $OUT $(wc -c <"$OUT") bytes, static"
}

# check_static fails unless $1 has no program interpreter (no dynamic loader).
check_static() {
	if command -v readelf >/dev/null 2>&1; then
		! readelf -l "$1" | grep -q 'INTERP' || { echo "build.sh: $1 is dynamically linked" >&2; exit 1; }
	elif command -v file >/dev/null 2>&1; then
		file "$1" | grep -q 'statically linked' || { echo "build.sh: $1 is not statically linked" >&2; exit 1; }
	else
		! grep -aq '/ld-linux' "$1" || { echo "build.sh: $1 names a dynamic loader" >&2; exit 1; }
	fi
}

case "${1:-build}" in
build)
	build
	;;
test)
	build
	go vet ./...
	# As root (CI), sandbox and namespace tests must run: they fail instead
	# of skipping when the kernel refuses them.
	if [ "$(id -u)" = 0 ]; then export CTX_REQUIRE_SANDBOX=1; fi
	CGO_ENABLED=0 go test -count=1 -timeout 40m ./...
	;;
demo)
	build
	exec ./scripts/demo.sh "$OUT"
	;;
bench)
	build
	exec ./scripts/bench.sh "$OUT"
	;;
*)
	echo "usage: ./build.sh [build|test|demo|bench]" >&2
	exit 2
	;;
esac
