"""fakeray: a stand-in for the real ``ray`` package in rayvast's tests.

Only ``import ray`` and ``python -m ray.scripts.scripts start --block ...`` are
provided; see test/fakeray/README.md.
"""

import os as _os

# The head refuses nodes older than Ray 2.52 (SPEC §6 step 6a): tests pick
# the version an image would report.
__version__ = _os.environ.get("FAKERAY_VERSION") or "2.53.0"
