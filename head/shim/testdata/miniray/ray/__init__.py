# miniray: the least of Ray's process tree that shows what the shim fixes
# (head/shim tests). test/fakeray is the full stand-in.
__version__ = "0.0.0-miniray"
