#!/bin/sh
# build.sh - build, test, demo and benchmark ctx.
#
#   ./build.sh            build the static binary ./ctx and print its size
#   ./build.sh test       the whole test suite (what CI runs)
#   ./build.sh demo       the main job on a built-in default (see README)
#   ./build.sh bench      benchmarks against baselines, as ratios
#
# Offline: GOPROXY=off ./build.sh builds from the module cache (filled
# once by `go mod download`); after `go mod vendor` the go command builds
# from vendor/ by itself. `./build.sh test` also fetches staticcheck once.
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/ctx}

# stamps are the -X flags behind `ctx --version`: VERSION from the
# environment, else the nearest v* tag; the commit too, because the go
# command leaves it out where VCS stamping is off (GOFLAGS=-buildvcs=false)
# or git refuses the checkout. Without git both stay empty and ctx falls
# back to what the go command stamped.
stamps() {
	v=${VERSION:-$(git describe --tags --match 'v*' --dirty 2>/dev/null || true)}
	c=$(git rev-parse HEAD 2>/dev/null || true)
	m=
	if [ -n "$c" ] && ! git diff --quiet HEAD -- 2>/dev/null; then m=true; fi
	printf '%s' "-X ctx/applets.version=$v -X ctx/applets.commit=$c -X ctx/applets.modified=$m -X 'ctx/applets.ldflags=$LDFLAGS'"
}

# LDFLAGS are the linker flags besides the stamps; -trimpath keeps the go
# command from recording them, so they are stamped too.
LDFLAGS='-s -w -buildid='

# STATICCHECK is the pinned staticcheck that `./build.sh test` runs through
# `go run`: the go command fetches it from the module proxy into its module
# cache the first time (CI needs nothing installed beforehand) and builds it
# from there afterwards; it is not a dependency of the module.
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2


build() {
	CGO_ENABLED=0 go build -trimpath -ldflags="$LDFLAGS $(stamps)" -o "$OUT" .
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
	go run "$STATICCHECK" ./...
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
