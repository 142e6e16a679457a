"""fakeray: a stand-in for the real ``ray`` package in rayvast's tests.

``import ray`` and ``python -m ray.scripts.scripts start …`` behave as Ray's
do where rayvast depends on them; see test/fakeray/README.md and SOURCES.md.
``ray.__version__`` is FAKERAY_VERSION when set (the agent's version probe
reads it), else a current 2.5x release.
"""

import os as _os

__version__ = _os.environ.get("FAKERAY_VERSION") or "2.53.0"
