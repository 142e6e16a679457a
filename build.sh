#!/usr/bin/env bash
# build.sh        build bin/head and bin/agent (static, reproducible) and print the agent's SHA-256
# build.sh test   gofmt check, build, vet, then run every test (what .ci/run runs)
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0
# Reproducible: no paths, no build id, no VCS stamp; two builds give the same bytes.
flags=(-trimpath -buildvcs=false -ldflags='-s -w -buildid=')

out=${BIN:-bin} # BIN=dir builds elsewhere (the reproducibility test builds twice)

build() {
	mkdir -p "$out"
	# The shim's native library first: head embeds it (head/shim).
	head/shim/native/build.sh head/shim/native/lib
	go build "${flags[@]}" -o "$out/agent" ./agent
	# head embeds the agent it serves (head/agentbin; --agent overrides).
	cp "$out/agent" head/agentbin/agent_built.bin
	go build "${flags[@]}" -o "$out/head" ./head
	go build "${flags[@]}" -o "$out/guesttoken" ./tools/guesttoken
	go build "${flags[@]}" -o "$out/fakevast" ./tools/fakevast
	echo "agent sha256: $(sha256sum "$out/agent" | cut -d' ' -f1) (built into head)"
	test/fakeray/build-natives.sh # the stand-in Ray's native raylet and core worker (cc)
}

case "${1:-build}" in
build) build ;;
test)
	# An unformatted file fails the build (gofmt also exits non-zero, and
	# so stops this script, on a file it cannot parse).
	unformatted=$(gofmt -l .)
	if [ -n "$unformatted" ]; then
		printf 'not gofmt-formatted (run gofmt -w):\n%s\n' "$unformatted" >&2
		exit 1
	fi
	build
	go vet ./...
	# -p 1: root tests share network namespaces, Docker and ports; one package at a time.
	go test -count=1 -p 1 -timeout 60m ./...
	# Fuzz the parsers that face strangers, briefly (one target per run). Counts,
	# not durations: Go 1.26's coordinator can fail a duration run with a bare
	# "context deadline exceeded" at the boundary (golang/go#75804, fixed in 1.27).
	go test -run '^$' -fuzz '^FuzzCanonical$' -fuzztime=1000000x ./internal/guestauth
	go test -run '^$' -fuzz '^FuzzVerify$' -fuzztime=500000x ./internal/guestauth
	go test -run '^$' -fuzz '^FuzzParseChallenge$' -fuzztime=400000x ./internal/portcheck
	go test -run '^$' -fuzz '^FuzzEnrollBody$' -fuzztime=100000x ./head/enroll
	;;
*)
	echo "usage: $0 [build|test]" >&2
	exit 2
	;;
esac
