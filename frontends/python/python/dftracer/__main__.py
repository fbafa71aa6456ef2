"""`python -m dftracer <what>`: prints where the wheel's native files are.

    preload    libdftracer_preload.so   (LD_PRELOAD=$(python -m dftracer preload))
    lib        libdftracer_core.so      (the same library, for -ldftracer_core)
    libdir     their directory          (-L, -Wl,-rpath)
    include    the include directory    (-I; dftracer/dftracer.h)
    pkgconfig  PKG_CONFIG_PATH entry    (pkg-config --cflags --libs dftracer)
    cmake      dftracer_DIR             (find_package(dftracer))
    version    the package version, and which Python layer is active (ours or pydftracer's)
    --version  the package version alone
"""

import sys

from . import __version__, layers, paths


def _version_report():
    """The version, then one line on the active Python layer and one on pydftracer."""
    lay = layers()
    lines = [__version__]
    if lay["active"] == "ours":
        lines.append(f"python layer: ours ({lay['path']})")
    else:
        lines.append(
            f"python layer: pydftracer {lay['pydftracer'] or '(unknown version)'}'s ({lay['path']}), "
            "chosen by DFTRACER_PYTHON_LAYER=pydftracer; unset it to use ours"
        )
    if lay["pydftracer"] and lay["active"] == "ours":
        where = lay["pydftracer_path"] or "its files are gone"
        lines.append(
            f"pydftracer {lay['pydftracer']} is installed too ({where}): not used; ours serves "
            "`dftracer.python` whatever was installed after it (DFTRACER_PYTHON_LAYER=pydftracer "
            "runs pydftracer's files instead)"
        )
    elif lay["active"] == "ours" and lay["pydftracer_path"]:
        lines.append(f"files of another dftracer.python layer are present ({lay['pydftracer_path']}): not used")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = paths()
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    what = argv[0]
    if what == "--version":
        print(__version__)
        return 0
    if what == "version":
        print(_version_report())
        return 0
    if what not in p:
        print(f"python -m dftracer: unknown '{what}'; one of: {', '.join(p)}, version", file=sys.stderr)
        return 2
    print(p[what])
    return 0


if __name__ == "__main__":
    sys.exit(main())
