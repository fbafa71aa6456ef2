"""Python thread names in the trace: every thread `threading` starts gets a `thread_name`
record carrying its Python name (`threading.Thread(name="loader")`), so Perfetto and
dfanalyzer show it. The native module calls `install` when tracing is on (with our layer and
with pydftracer's over our native module alike), passing its `_name_thread`.

How: `threading.setprofile` is the documented hook that runs in each new thread before its
`run()`. Ours runs once per thread (at its first call event), names the thread, and puts
back the profile function threading would have installed (a user's or a profiler's, which
also sees that first event). A later `threading.setprofile` by the program replaces ours:
threads it starts after that keep their numeric name. Threads already running at import are
named at once.
"""

import sys
import threading

_name_thread = None


def _name(t):
    tid = getattr(t, "native_id", None)
    if tid:
        _name_thread(tid, t.name)


def _previous():
    get = getattr(threading, "getprofile", None)  # 3.10+
    return get() if get is not None else getattr(threading, "_profile_hook", None)


_prev = None


def _first_call(frame, event, arg):
    sys.setprofile(_prev)
    try:
        _name(threading.current_thread())
    except Exception:  # never disturb the thread
        pass
    if _prev is not None:
        return _prev(frame, event, arg)
    return None


def install(name_thread):
    """Names every thread threading starts from now on, and those running now."""
    global _name_thread, _prev
    _name_thread = name_thread
    if _previous() is _first_call:
        return  # installed already
    _prev = _previous()
    threading.setprofile(_first_call)
    for t in threading.enumerate():
        if t is not threading.main_thread():
            _name(t)

