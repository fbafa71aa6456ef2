"""`dftracer.python._version`: the pydftracer release whose API this layer provides.

`__version__` is "2.0.6": code that checks pydftracer's version (`dftracer.python.__version__`
or this module's) sees the release it is compatible with. dftracer-rs's own version is
`dftracer.__version__` (and `python -m dftracer version`).
"""

__all__ = ["__version__", "__version_tuple__", "version", "version_tuple", "__commit_id__", "commit_id"]

__version__ = version = "2.0.6"
__version_tuple__ = version_tuple = (2, 0, 6)
__commit_id__ = commit_id = None
