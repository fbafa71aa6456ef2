//! The one place that names, creates and writes trace files.
//!
//! Names: `<prefix>-<h16>-<app|preload|fork>.pfw[.gz]` (reference §1). A file is created only
//! when there is something to write (no 0-byte files), always with `O_EXCL`: an existing file
//! of that name (another run's) is never appended to or clobbered; the next free
//! `<prefix>-<h16>-<suffix>-<n>.pfw[.gz]` is used instead.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;

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
/// - `prefix` itself, when it exists, is a regular file: a device, directory, fifo or socket
///   is refused (`/dev/full` as a prefix would otherwise make `/dev/full-<hash>-app.pfw.gz`);
/// - its directory exists, is a directory, is not on a device, proc or sys filesystem, and
///   is writable.
///
/// The error says what is wrong, naming the path.
pub fn check_dir(prefix: &str) -> io::Result<()> {
    if let Ok(meta) = std::fs::metadata(prefix) {
        if !meta.is_file() {
            let hint = if meta.is_dir() {
                format!(" (for files inside it, use {prefix}/trace)")
            } else {
                String::new()
            };
            return Err(refuse(format!(
                "{prefix} exists and is {}; a trace prefix must be a new name or a regular file{hint}",
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

/// An open trace file.
pub struct Sink {
    file: File,
    pub path: String,
    pub bytes: u64,
}

impl Sink {
    /// Creates a fresh file for `prefix`/`hash`/`origin`, never reusing an existing name.
    pub fn create(prefix: &str, hash: &str, origin: Origin, compressed: bool) -> io::Result<Sink> {
        for n in 0..10_000 {
            let path = trace_path(prefix, hash, origin, n, compressed);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Sink {
                        file,
                        path,
                        bytes: 0,
                    })
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

    /// Writes `data` completely (one `write` in the common case).
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.bytes += data.len() as u64;
        Ok(())
    }

    pub fn sync(&mut self) {
        let _ = self.file.sync_data();
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
}
