#!/bin/sh
# bootloader.sh: the container command of a rayvast candidate (docs/protocol.md §3).
# It holds no secret and prints none: the join token stays in the env for the agent.
# Steps: find a Python that can import ray, fetch the agent from the head's port A (or
# take /opt/rayvast/agent from the image), check its SHA-256 against
# RAYVAST_BOOTSTRAP_SHA256, exec it (PID 1 stays PID 1).
# POSIX sh: dash, bash and busybox ash run it unchanged.
#
# Test knobs (the defaults wait about ten minutes for the head's firewall to open):
#   RAYVAST_BOOT_TRIES    download attempts (default 25)
#   RAYVAST_BOOT_MAXWAIT  cap in seconds of the doubling wait between attempts (default 30)
die() { echo "bootloader: $*" >&2; exit 1; }
[ -n "$RAYVAST_HEAD" ] || die "RAYVAST_HEAD is not set (the head's IP)"
A=$RAYVAST_PORT_A
case $A in ''|*[!0-9]*|??????*) A=0;; esac
[ $A -ge 1 ] && [ $A -le 65535 ] || die "RAYVAST_PORT_A is not a port number (1-65535)"
S=$RAYVAST_BOOTSTRAP_SHA256
case $S in *[!0-9a-f]*) S=;; esac
[ ${#S} = 64 ] || die "RAYVAST_BOOTSTRAP_SHA256 is not 64 lowercase hex digits"
# A bare name becomes an absolute path via command -v, so the agent does not depend on
# PATH; a wrapper script given in RAYVAST_PYTHON is kept as it is.
P=
for c in "${RAYVAST_PYTHON:-python3}" python3 python /opt/conda/bin/python \
	/usr/local/bin/python3 /venv/bin/python /opt/venv/bin/python "$HOME/.venv/bin/python"; do
	p=$(command -v "$c") && "$p" -c 'import ray' >/dev/null 2>&1 && { P=$p; break; }
done
[ -n "$P" ] || die "no Python that can import ray (tried RAYVAST_PYTHON, python3, python, conda, venv, /usr/local); set RAYVAST_PYTHON"
# An IPv6 literal needs brackets in a URL.
H=$RAYVAST_HEAD
case $H in \[*) ;; *:*) H="[$H]";; esac
U="https://$H:$A/bootstrap"
D=$(mktemp -d) && chmod 700 "$D" || die "cannot make a private temp dir"
F=$D/agent
trap 'rm -rf "$D"' EXIT
# As PID 1 the shell ignores signals it has no trap for: let a stop end the wait.
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM
# The certificate is not checked (integrity is the hash below). No proxy: the head
# admits this container's own IP only. read() without a size raises on a short body.
DL='import ssl,sys,urllib.request as u
try:
 o=u.build_opener(u.ProxyHandler({}),u.HTTPSHandler(context=ssl._create_unverified_context()))
 b=o.open(sys.argv[1],timeout=20).read()
 with open(sys.argv[2],"wb") as f:f.write(b)
except Exception as e:sys.exit("bootloader: %s: %s"%(sys.argv[1],e))'
h() { "$P" -c 'import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$F"; }
n=0 w=1 M=${RAYVAST_BOOT_MAXWAIT:-30}
# An agent built into the image is run when it is the one the head serves (the same hash
# check); any other is left alone and the head's is fetched.
E=/opt/rayvast/agent
[ -f $E ] && cp $E "$F" && [ "$(h)" = "$S" ] ||
until "$P" -c "$DL" "$U" "$F"; do
	n=$((n+1))
	[ $n -lt "${RAYVAST_BOOT_TRIES:-25}" ] || die "gave up on $U after $n tries"
	echo "bootloader: retry in ${w}s" >&2
	sleep $w & wait $!
	w=$((w*2)); [ $w -le "$M" ] || w=$M
done
G=$(h)
[ -s "$F" ] && [ "$G" = "$S" ] || die "$U: got $(wc -c <"$F") bytes with SHA-256 $G, want RAYVAST_BOOTSTRAP_SHA256 $S; deleted, not run"
chmod 700 "$F" || die "chmod $F failed"
trap - EXIT HUP INT TERM
export RAYVAST_PYTHON="$P"
exec "$F" "$@"
