# dftracer-rs: the package's code is in _rs_init.py (another wheel may replace this file:
# see there). Run when no .pth file was read (python -S); otherwise _dftracer_rs.py runs
# _rs_init.py as the package and this file is not used.
import os as _os

with open(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_rs_init.py")) as _f:
    exec(compile(_f.read(), _f.name, "exec"))
