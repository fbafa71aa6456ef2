//! The one place that names, creates and writes trace files.
//!
//! Names: `<prefix>-<h16>-<app|preload|fork>.pfw[.gz]` (reference §1). A file is created only
//! when there is something to write (no 0-byte files), always with `O_EXCL`: an existing file
//! of that name (another run's) is never appended to or clobbered; the next free
//! `<prefix>-<h16>-<suffix>-<n>.pfw[.gz]` is used instead.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::sys;

/// The descriptor held for the trace file until it is created (`-1`: none), and the identity
/// (device, inode) of what it names.
static RESERVE_FD: AtomicI32 = AtomicI32::new(-1);
static RESERVE_DEV: AtomicU64 = AtomicU64::new(0);
static RESERVE_INO: AtomicU64 = AtomicU64::new(0);

/// The descriptor of the process's open trace file and the identity of what it names (`-1`:
/// none), published for a fork child: its `pthread_atfork` handler cannot take a lock, and
/// must tell the inherited copy (closed, or kept as the child's reserve) from a number the
/// program reused. Set by [`Sink::create`] and a reopen, cleared by [`unpublish`].
static TRACE_FD: AtomicI32 = AtomicI32::new(-1);
static TRACE_DEV: AtomicU64 = AtomicU64::new(0);
static TRACE_INO: AtomicU64 = AtomicU64::new(0);

/// The kernel tid of the thread changing the reserve or the trace descriptor (closing one,
/// opening the other, publishing it), 0 when none. A `fork` in the middle of such a change
/// would give the child a descriptor that neither [`TRACE_FD`] nor the reserve names yet
/// (one slot of its table lost for good: a program that fills its table then sees two
/// descriptors fewer than untraced); [`settle_before_fork`] lets the change finish first.
static CHANGING: AtomicU32 = AtomicU32::new(0);

/// Marks a descriptor change in flight for its lifetime ([`CHANGING`]). Nested or concurrent
/// changes hold nothing more (one tid is enough: the writer makes every change but the
/// reserve at `init` and a fork child's, which run while no writer changes anything).
/// System calls only: async-signal-safe.
struct Changing(bool);

impl Changing {
    fn begin() -> Changing {
        let me = sys::gettid();
        Changing(
            CHANGING
                .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
                .is_ok(),
        )
    }
}

impl Drop for Changing {
    fn drop(&mut self) {
        if self.0 {
            CHANGING.store(0, Ordering::Release);
        }
    }
}

/// The `pthread_atfork` prepare step: waits (at most 200 ms, in 50 us naps) until no other
/// thread is between closing the reserve and publishing the trace file's descriptor, so the
/// child inherits a table whose every tracer descriptor is named. A change made by the forking
/// thread itself (a signal handler that forks) is not waited for. Async-signal-safe.
pub fn settle_before_fork() {
    let holder = CHANGING.load(Ordering::Acquire);
    if holder == 0 || holder == sys::gettid() {
        return;
    }
    for _ in 0..4000 {
        if CHANGING.load(Ordering::Acquire) == 0 {
            return;
        }
        sys::sleep_us(50);
    }
}

/// In a fork child: no change is in flight (the thread that was making one, if the prepare
/// step gave up waiting for it, does not exist here). Async-signal-safe.
pub fn after_fork_child() {
    CHANGING.store(0, Ordering::Release);
}

/// The published trace descriptor and its identity, or `None` ([`TRACE_FD`]).
pub fn published() -> Option<(i32, (u64, u64))> {
    let fd = TRACE_FD.load(Ordering::Acquire);
    (fd >= 0).then(|| {
        (
            fd,
            (
                TRACE_DEV.load(Ordering::Relaxed),
                TRACE_INO.load(Ordering::Relaxed),
            ),
        )
    })
}

fn publish(fd: i32, id: (u64, u64)) {
    TRACE_DEV.store(id.0, Ordering::Relaxed);
    TRACE_INO.store(id.1, Ordering::Relaxed);
    TRACE_FD.store(fd, Ordering::Release);
}

/// Forgets the published descriptor: before the file closes (a fork child then never closes
/// a number reused since), and in a fork child once it has dealt with its inherited copy.
/// Async-signal-safe.
pub fn unpublish() {
    TRACE_FD.store(-1, Ordering::Release);
}

/// Holds one slot of the descriptor table for the trace file, which is created lazily (no
/// file without an event): a program that fills its table (`EMFILE`) before the first write
/// would otherwise lose its whole trace. The slot is a placeholder ([`sys::reserve_fd`]: an
/// empty memfd, high and close-on-exec, out of the numbers programs use); [`Sink::create`]
/// closes it right before it creates the file, which takes the freed slot. So the program
/// has one descriptor fewer than untraced from the start, as it has anyway once its trace
/// file is open. No-op when one is held already. Called by `init`.
pub fn reserve() {
    if RESERVE_FD.load(Ordering::Acquire) >= 0 {
        return;
    }
    let _c = Changing::begin();
    if let Some((fd, id)) = sys::reserve_fd() {
        adopt_reserve(fd, id);
    }
}

/// Makes `fd` (naming `id`) the reserve: a fork child keeps the inherited copy of its
/// parent's trace descriptor as its own placeholder (that slot is free in no other way).
/// Async-signal-safe.
pub fn adopt_reserve(fd: i32, id: (u64, u64)) {
    RESERVE_DEV.store(id.0, Ordering::Relaxed);
    RESERVE_INO.store(id.1, Ordering::Relaxed);
    RESERVE_FD.store(fd, Ordering::Release);
}

/// Whether a reserve is held (it may have been closed by the program since).
pub fn has_reserve() -> bool {
    RESERVE_FD.load(Ordering::Acquire) >= 0
}

/// Whether `fd` is the reserve's number (a fork child's adopted copy of its parent's trace
/// fd is both: a second fork before the child's own state exists sees it as the trace fd).
pub fn is_reserve(fd: i32) -> bool {
    fd >= 0 && RESERVE_FD.load(Ordering::Acquire) == fd
}

/// Gives the reserved slot back: closes the placeholder if its number still names it (a
/// program that closed it, `closefrom` or a close loop, or put one of its own files there,
/// `dup2`, keeps its number: it is forgotten, not closed). Async-signal-safe.
pub fn release_reserve() {
    let _c = Changing::begin();
    let fd = RESERVE_FD.swap(-1, Ordering::AcqRel);
    if fd >= 0
        && sys::fd_identity(fd)
            == Some((
                RESERVE_DEV.load(Ordering::Relaxed),
                RESERVE_INO.load(Ordering::Relaxed),
            ))
    {
        sys::close_fd(fd);
    }
}

/// Which part of the program started the tracer; the last part of the file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    App,
    Preload,
    Fork,
    /// The node service: `<prefix>_<hostname>.pfw.gz` (no hash, no pid).
    Service,
}

impl Origin {
    /// The inverse of `origin as u8`.
    pub fn from_u8(v: u8) -> Origin {
        match v {
            x if x == Origin::Preload as u8 => Origin::Preload,
            x if x == Origin::Fork as u8 => Origin::Fork,
            x if x == Origin::Service as u8 => Origin::Service,
            _ => Origin::App,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::App => "app",
            Origin::Preload => "preload",
            Origin::Fork => "fork",
            Origin::Service => "service",
        }
    }
}

/// The reference's prefix rule for a path given to `initialize(log_file)`: the path minus a
/// trailing `.pfw.gz`, else `.pfw`, else the last extension of the basename (unless the
/// basename's only dot is its first character).
pub fn prefix_from_api_path(path: &str) -> String {
    let (dir, base) = match path.rfind('/') {
        Some(i) => (&path[..=i], &path[i + 1..]),
        None => ("", path),
    };
    let stem = if let Some(s) = base.strip_suffix(".pfw.gz") {
        s
    } else if let Some(s) = base.strip_suffix(".pfw") {
        s
    } else {
        match base.rfind('.') {
            Some(i) if i > 0 => &base[..i],
            _ => base,
        }
    };
    format!("{dir}{stem}")
}

/// `<prefix>-<hash>-<suffix>[-<n>].pfw[.gz]`; for [`Origin::Service`], `hash` is the hostname
/// and the name is `<prefix>_<hostname>[-<n>].pfw[.gz]`.
pub fn trace_path(prefix: &str, hash: &str, origin: Origin, n: u32, compressed: bool) -> String {
    let ext = if compressed { ".pfw.gz" } else { ".pfw" };
    if origin == Origin::Service {
        return if n == 0 {
            format!("{prefix}_{hash}{ext}")
        } else {
            format!("{prefix}_{hash}-{n}{ext}")
        };
    }
    if n == 0 {
        format!("{prefix}-{hash}-{}{ext}", origin.as_str())
    } else {
        format!("{prefix}-{hash}-{}-{n}{ext}", origin.as_str())
    }
}

/// The directory part of a prefix (`/` for `/x`, `.` for a bare name).
fn dir_of(prefix: &str) -> &str {
    match prefix.rfind('/') {
        Some(0) => "/",
        Some(i) => &prefix[..i],
        None => ".",
    }
}

fn refuse(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// What a file that exists is, in words (for "exists and is ...").
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a fifo"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `None` when `dir` (an existing directory) can hold regular files as far as its filesystem
/// goes; else which kind of filesystem it is on. `/dev` counts when it is its own mount
/// (devtmpfs reports the tmpfs magic, so it is told by device number); other mounts below it
/// (`/dev/shm`) are ordinary.
fn special_fs(dir: &str, meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if let Some(fs) = crate::sys::pseudo_fs(dir) {
        return Some(fs);
    }
    let dev = std::fs::metadata("/dev").ok()?;
    let root = std::fs::metadata("/").ok()?;
    (dev.dev() != root.dev() && meta.dev() == dev.dev()).then_some("device (/dev)")
}

/// Checks, without creating anything, that trace files can be created with `prefix`
/// (`<prefix>-<hash>-<suffix>.pfw.gz`):
/// - `prefix` itself, when it exists, is a regular file or a directory (a prefix is a prefix:
///   `<dir>-<hash>-app.pfw.gz` is written next to the directory `<dir>`, as the reference
///   does); a device, fifo or socket is refused (`/dev/full` as a prefix would otherwise make
///   `/dev/full-<hash>-app.pfw.gz`);
/// - its directory exists, is a directory, is not on a device, proc or sys filesystem, and
///   is writable.
///
/// The error says what is wrong, naming the path.
pub fn check_dir(prefix: &str) -> io::Result<()> {
    if let Ok(meta) = std::fs::metadata(prefix) {
        if !meta.is_file() && !meta.is_dir() {
            return Err(refuse(format!(
                "{prefix} exists and is {}; a trace prefix must be a new name, a regular file or a directory",
                kind_of(&meta)
            )));
        }
    }
    let dir = dir_of(prefix);
    let meta = std::fs::metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("directory {dir}: {e}")))?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{dir} is not a directory"),
        ));
    }
    if let Some(fs) = special_fs(dir, &meta) {
        return Err(refuse(format!(
            "directory {dir} is on a {fs} filesystem, which does not hold trace files"
        )));
    }
    crate::sys::dir_writable(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("directory {dir}: {e}")))
}

/// [`check_dir`], after creating the missing directories of `prefix` (mode 0755 before the
/// umask, like `mkdir -p`). Nothing is created below a device, proc or sys filesystem, nor
/// when `prefix` itself is refused.
pub fn prepare_dir(prefix: &str) -> io::Result<()> {
    let dir = dir_of(prefix);
    if std::fs::metadata(dir).is_err() {
        // The nearest existing ancestor decides where the new directories would go.
        let mut up = std::path::Path::new(dir);
        while let Some(parent) = up.parent() {
            up = parent;
            let Ok(meta) = std::fs::metadata(if up.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                up
            }) else {
                continue;
            };
            if meta.is_dir() {
                if let Some(fs) = special_fs(&up.to_string_lossy(), &meta) {
                    return Err(refuse(format!(
                        "directory {dir} would be on a {fs} filesystem, which does not hold trace files"
                    )));
                }
            }
            break;
        }
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create directory {dir}: {e}")))?;
    }
    check_dir(prefix)
}

/// An open trace file, owned by the tracer even inside a hostile host program.
///
/// The descriptor lives far above the ones programs use ([`sys::high_fd_floor`]) and is
/// close-on-exec. Programs may still close it (`closefrom`, `close_range`, a close loop) or
/// make its number point at one of their files (`dup2`, `exec 3>` in a shell): before every
/// write the sink checks that the descriptor still names its own file (device and inode) and,
/// if not, forgets the number (never closing it: it may be the program's now) and reopens its
/// file by path. Writes are positional: at the end of the file, or over its last few bytes (the
/// provisional end of an open gzip member, [`Sink::write_over`]); a failed or partial write is
/// undone and the file stays a sequence of whole members.
pub struct Sink {
    fd: i32,
    id: (u64, u64),
    pub path: String,
    /// Bytes of complete members in the file.
    pub bytes: u64,
    /// Times the descriptor was found closed or taken over and the file reopened.
    pub reopened: u32,
    /// The file's last `tail_len` bytes, to put back when a write that replaced them fails.
    tail: [u8; TAIL],
    tail_len: usize,
}

/// Most bytes a write may replace at the end of the file ([`Sink::write_over`]).
pub const TAIL: usize = 32;

/// Why a write did not reach the file.
#[derive(Debug)]
pub enum WriteError {
    /// The write failed (full disk, I/O error); the file was cut back to its complete members.
    Io(io::Error),
    /// The descriptor was taken and the file cannot be reopened (deleted, replaced).
    Lost(io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Io(e) => write!(f, "{e}"),
            WriteError::Lost(e) => write!(f, "the trace file cannot be reopened: {e}"),
        }
    }
}

impl Sink {
    /// Creates a fresh file for `prefix`/`hash`/`origin`, never reusing an existing name.
    ///
    /// The reserved descriptor ([`reserve`]) is given back first, so the file gets its slot
    /// even when the program holds every other one. A thread of the program opening a file
    /// between the two calls can take that slot (then this fails with `EMFILE`, as it would
    /// without the reserve).
    pub fn create(prefix: &str, hash: &str, origin: Origin, compressed: bool) -> io::Result<Sink> {
        let _c = Changing::begin();
        release_reserve();
        for n in 0..10_000 {
            let path = trace_path(prefix, hash, origin, n, compressed);
            match sys::open_trace_fd(&path, true) {
                Ok(fd) => {
                    let Some(id) = sys::fd_identity(fd) else {
                        sys::close_fd(fd);
                        return Err(io::Error::last_os_error());
                    };
                    publish(fd, id);
                    return Ok(Sink {
                        fd,
                        id,
                        path,
                        bytes: 0,
                        reopened: 0,
                        tail: [0; TAIL],
                        tail_len: 0,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free trace file name",
        ))
    }

    /// Makes sure `self.fd` is this sink's file, reopening it by path if the program closed
    /// the descriptor or made it point elsewhere.
    fn ensure_own_fd(&mut self) -> Result<(), WriteError> {
        if self.fd >= 0 && sys::fd_identity(self.fd) == Some(self.id) {
            return Ok(());
        }
        // Not ours any more: the number may now be one of the program's files. Forget it.
        let _c = Changing::begin();
        self.fd = -1;
        unpublish();
        let fd = sys::open_trace_fd(&self.path, false).map_err(WriteError::Lost)?;
        if sys::fd_identity(fd) != Some(self.id) {
            sys::close_fd(fd);
            return Err(WriteError::Lost(io::Error::new(
                io::ErrorKind::NotFound,
                "another file now has its name",
            )));
        }
        self.fd = fd;
        publish(fd, self.id);
        self.reopened += 1;
        Ok(())
    }

    /// Appends one complete member (the unit tests'; the writer uses `write_over`). On failure nothing of it stays in the file (it is cut
    /// back to the previous member), so the file remains valid and later writes can resume.
    #[cfg(test)]
    pub fn write(&mut self, data: &[u8]) -> Result<(), WriteError> {
        self.write_over(data, 0)
    }

    /// Replaces the file's last `rewind` bytes (at most [`TAIL`], and at most `data.len()`)
    /// by `data`: how a gzip member that stays open grows (`gzip.rs`: each write ends with a
    /// provisional end that the next one replaces). On failure the file is put back as it
    /// was (the replaced bytes rewritten, the file cut to its old length), so it still ends
    /// with its last complete state.
    pub fn write_over(&mut self, data: &[u8], rewind: usize) -> Result<(), WriteError> {
        assert!(
            rewind <= self.tail_len && rewind <= data.len(),
            "rewind {rewind} of {} known bytes",
            self.tail_len
        );
        self.ensure_own_fd()?;
        let at = self.bytes - rewind as u64;
        match sys::pwrite_all(self.fd, data, at) {
            Ok(()) => {
                // The new last TAIL bytes: the kept part of the old tail, then data.
                let mut t = [0u8; 2 * TAIL];
                let kept = self.tail_len - rewind;
                t[..kept].copy_from_slice(&self.tail[..kept]);
                let d = &data[data.len().saturating_sub(TAIL)..];
                t[kept..kept + d.len()].copy_from_slice(d);
                let n = kept + d.len();
                let from = n.saturating_sub(TAIL);
                self.tail_len = n - from;
                self.tail[..self.tail_len].copy_from_slice(&t[from..n]);
                self.bytes = at + data.len() as u64;
                Ok(())
            }
            Err(e) => {
                let old = &self.tail[self.tail_len - rewind..self.tail_len];
                let _ = sys::pwrite_all(self.fd, old, at);
                let _ = sys::truncate_fd(self.fd, self.bytes);
                Err(WriteError::Io(e))
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if self.fd >= 0 {
            let _ = TRACE_FD.compare_exchange(self.fd, -1, Ordering::AcqRel, Ordering::Acquire);
        }
        if self.fd >= 0 && sys::fd_identity(self.fd) == Some(self.id) {
            sys::close_fd(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_prefix_rules() {
        assert_eq!(prefix_from_api_path("sub/mytrace.json"), "sub/mytrace");
        assert_eq!(prefix_from_api_path("sub/.hidden"), "sub/.hidden");
        assert_eq!(prefix_from_api_path("sub/x.pfw.gz"), "sub/x");
        assert_eq!(prefix_from_api_path("/a.b/c"), "/a.b/c");
        assert_eq!(prefix_from_api_path("t.pfw"), "t");
    }

    #[test]
    fn never_reuses_a_name() {
        let dir = std::env::temp_dir().join(format!("dft-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = format!("{}/t", dir.display());
        let first = trace_path(&prefix, "h", Origin::App, 0, true);
        std::fs::write(&first, b"PRE-EXISTING\n").unwrap();
        let mut s = Sink::create(&prefix, "h", Origin::App, true).unwrap();
        assert!(s.path.ends_with("t-h-app-1.pfw.gz"), "{}", s.path);
        s.write(b"x").unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), b"PRE-EXISTING\n");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn write_over_replaces_the_tail() {
        let dir = std::env::temp_dir().join(format!("dft-sink-over-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = format!("{}/t", dir.display());
        let mut s = Sink::create(&prefix, "h", Origin::App, true).unwrap();
        s.write(b"head:END1").unwrap();
        s.write_over(b"more:END2", 4).unwrap();
        // Longer than the kept tail: the tail is rebuilt from data alone.
        let long = [b'x'; 40];
        s.write_over(&long, 4).unwrap();
        s.write_over(b"yyyyEND3", 3).unwrap();
        let mut expect = b"head:more:".to_vec();
        expect.extend_from_slice(&long[..37]);
        expect.extend_from_slice(b"yyyyEND3");
        assert_eq!(std::fs::read(&s.path).unwrap(), expect);
        assert_eq!(s.bytes, expect.len() as u64);
        std::fs::remove_dir_all(dir).ok();
    }
}
