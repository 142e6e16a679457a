"""Stand-in of Ray's python/ray/_private/ray_process_reaper.py: reads stdin
(inherited from `ray start`) until EOF, i.e. until `ray start` is gone, then
SIGTERMs its process group and, one second later, SIGKILLs it."""

import os
import signal
import sys
import time


def reap(*_):
    def last_resort(*_):
        time.sleep(1)
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, last_resort)
    os.killpg(0, signal.SIGTERM)


def main():
    while len(sys.stdin.read()) != 0:
        pass
    reap()


if __name__ == "__main__":
    main()
