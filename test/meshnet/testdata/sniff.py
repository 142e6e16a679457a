"""Capture every frame on one interface (AF_PACKET) into a file until
SIGTERM: the path between the nodes, for the plaintext check.
argv: interface outfile"""
import signal, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], "wb")
signal.signal(signal.SIGTERM, lambda *a: (out.flush(), sys.exit(0)))
print("ready", flush=True)
while True:
    out.write(s.recv(65536))
