#!/usr/bin/env bash
# The native library under each of its names and (--prefix DIR) the install layout: see
# frontends/preload/pkg/native-lib.sh (kept in the preload crate so that the Python source
# distribution carries it), which this runs with the same arguments.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../frontends/preload/pkg/native-lib.sh" "$@"
