#!/bin/sh
# build.sh OUTDIR: build natshim-<arch>.so (the shim's native layer) with the
# system gcc. Reproducible: fixed flags, no debug info, no build id, symbols
# stripped, so the same compiler gives the same bytes from any directory.
set -eu
out=${1:?usage: $0 OUTDIR}
src=$(dirname "$0")/natshim.c
arch=$(${CC:-gcc} -dumpmachine | cut -d- -f1)
mkdir -p "$out"
# -nostartfiles: no crt code, so no weak refs to __cxa_finalize and friends;
# no stack protector or fortify: their symbols are newer than the pinned base;
# --hash-style=both: loaders older than glibc 2.5 need DT_HASH.
${CC:-gcc} -std=c99 -O2 -fPIC -shared -nostartfiles -fvisibility=hidden \
	-fno-stack-protector -U_FORTIFY_SOURCE -fno-ident -fno-asynchronous-unwind-tables \
	-Wall -Wextra -Werror \
	-Wl,--build-id=none -Wl,--hash-style=both -Wl,-s -Wl,-z,noexecstack -Wl,-z,noseparate-code \
	-o "$out/.natshim-$arch.so.tmp.$$" "$src"
# Renamed into place: a build embedding the dir meanwhile never sees half a
# file (go:embed skips dot files).
mv -f "$out/.natshim-$arch.so.tmp.$$" "$out/natshim-$arch.so"
