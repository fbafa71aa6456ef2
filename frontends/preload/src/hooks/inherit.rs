//! fds inherited at start: a program started with a traced file already open (a shell's
//! `> data/out`, a parent's pipe of files) would otherwise move bytes on fds the tables do not
//! know. At start the library lists `/proc/self/fd` once and adopts every fd whose file is
//! under a data dir, so `cat data/in > data/out` records the writes (or copies) to fd 1;
//! `stdin`/`stdout`/`stderr` on such fds become traced streams (`sort > data/out`).
#![allow(clippy::undocumented_unsafe_blocks)]

use crate::table::intern;
use crate::{filter, FDS, FILES};

/// Adopts the traced files among the fds open now (called once, from `start`, inside a
/// recording section so that the calls made here are not traced).
pub(crate) fn adopt_inherited() {
    let Some(filter) = filter() else { return };
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let mut fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    fds.sort_unstable();
    for fd in fds {
        let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
            continue;
        };
        let p = target.as_os_str().as_encoded_bytes();
        if p.first() == Some(&b'/') && filter.traces(p) {
            let Some(file) = intern(p) else { continue };
            FDS.set(fd, file.handle().pin());
            // The standard streams on such an fd are traced streams.
            let std_stream = match fd {
                0 => Some(unsafe { stdin }),
                1 => Some(unsafe { stdout }),
                2 => Some(unsafe { stderr }),
                _ => None,
            };
            if let Some(fp) = std_stream.filter(|fp| !fp.is_null()) {
                FILES.insert(fd, fp as usize, file);
            }
        }
    }
}

extern "C" {
    static stdin: *mut libc::FILE;
    static stdout: *mut libc::FILE;
    static stderr: *mut libc::FILE;
}
