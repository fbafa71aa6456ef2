"""The `dftracer` console script: runs the command-line tool bundled with the wheel
(`dftracer/_native/bin/dftracer`, built from `frontends/cli`): `dftracer perfetto|summary|validate`."""

import os
import sys


def main() -> int:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "bin", "dftracer")
    if not os.path.isfile(exe):
        print(f"dftracer: the bundled tool is missing ({exe}); reinstall the package", file=sys.stderr)
        return 1
    args = [exe] + sys.argv[1:]
    try:
        os.execv(exe, args)
    except PermissionError:
        # An installer that dropped the executable bit: restore it once, if allowed.
        try:
            os.chmod(exe, 0o755)
            os.execv(exe, args)
        except OSError as e:
            print(f"dftracer: cannot run {exe}: {e}", file=sys.stderr)
            return 1
    return 0  # not reached: execv replaced the process


if __name__ == "__main__":
    sys.exit(main())
