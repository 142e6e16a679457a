"""A stranger at the mesh port: TLS without a client certificate (and, if
that got through, a port line). Prints what it got."""
import socket, ssl, sys
host, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
ctx.set_alpn_protocols(["rayvast-mesh/1"])
try:
    with socket.create_connection((host, port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as s:
            s.sendall(target.encode() + b"\n")
            got = s.recv(64)
            print("GOT %r" % got)
except Exception as e:
    print("REFUSED %s: %s" % (type(e).__name__, e))
