"""`python -m dftracer <what>`: prints where the wheel's native files are.

    preload    libdftracer_preload.so   (LD_PRELOAD=$(python -m dftracer preload))
    lib        libdftracer_core.so      (the same library, for -ldftracer_core)
    libdir     their directory          (-L, -Wl,-rpath)
    include    the include directory    (-I; dftracer/dftracer.h)
    pkgconfig  PKG_CONFIG_PATH entry    (pkg-config --cflags --libs dftracer)
    cmake      dftracer_DIR             (find_package(dftracer))
    version    the package version
"""

import sys

from . import __version__, paths


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = paths()
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    what = argv[0]
    if what in ("version", "--version"):
        print(__version__)
        return 0
    if what not in p:
        print(f"python -m dftracer: unknown '{what}'; one of: {', '.join(p)}, version", file=sys.stderr)
        return 2
    print(p[what])
    return 0


if __name__ == "__main__":
    sys.exit(main())
