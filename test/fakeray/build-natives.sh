#!/bin/sh
# build-natives.sh: compile the stand-in's native programs (native/*.c) into
# ray/core/src/ray/…, where Ray's own wheel keeps its raylet and GCS. Dynamic
# glibc binaries on purpose (an LD_PRELOAD library must see their bind and
# connect calls). Rebuilds only what is older than its sources; each output
# is renamed into place, so a parallel run never sees half a binary.
# Called by ../../build.sh, by the Go tests (fakeray.BuildNatives) and by
# the Docker provider's image build. CC overrides the compiler (default cc).
set -eu
cd "$(dirname "$0")"
cc=${CC:-cc}
out=ray/core/src/ray
build() { # build SRC OUT
	if [ -x "$2" ] && [ ! native/"$1" -nt "$2" ] && [ ! native/status.h -nt "$2" ]; then
		return 0
	fi
	mkdir -p "$(dirname "$2")"
	tmp="$2.tmp.$$"
	# -s and no paths: the same sources give the same bytes (the image tag
	# hashes them).
	"$cc" -O2 -s -Wall -Wextra -ffile-prefix-map="$PWD"=. -o "$tmp" native/"$1"
	mv -f "$tmp" "$2"
}
build raylet.c "$out/raylet/raylet"
build raylet.c "$out/gcs/gcs_server"
build core_worker.c "$out/core_worker/core_worker"
