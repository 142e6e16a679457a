"""fakeray: a stand-in for the real ``ray`` package in rayvast's tests.

Only ``import ray`` and ``python -m ray.scripts.scripts start --block ...`` are
provided; see test/fakeray/README.md.
"""

__version__ = "0.0.0+fakeray"
