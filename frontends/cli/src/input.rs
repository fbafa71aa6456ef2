//! Trace files in: directories are listed (`*.pfw`, `*.pfw.gz`, and `*.json`/`*.json.gz`
//! for Chrome-style traces), gzip is recognised by its magic bytes (any number of members),
//! lines are handed out one at a time from a fixed buffer (memory does not grow with the
//! file), and files are shared out to one worker thread per core.

use std::fs::FileType;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The longest line delivered (16 MiB, without its newline). The tracer's lines are far
/// shorter (strings are clipped at 4 KiB, at most 32 args per event); a longer line
/// is counted, reported (line number, length) and skipped: its bytes are dropped as they are
/// read, never held.
pub const MAX_LINE: usize = 16 << 20;

/// The read buffer (it grows only while a line longer than it is pending, up to
/// [`MAX_LINE`]).
const CHUNK: usize = 1 << 20;

/// What a path is, when it is neither a regular file nor a directory.
pub fn kind(t: FileType) -> &'static str {
    if t.is_fifo() {
        "is a FIFO"
    } else if t.is_char_device() {
        "is a character device"
    } else if t.is_block_device() {
        "is a block device"
    } else if t.is_socket() {
        "is a socket"
    } else if t.is_dir() {
        "is a directory"
    } else if t.is_symlink() {
        "is a symbolic link"
    } else {
        "is not a regular file"
    }
}

/// An OS error in words (without Rust's "(os error N)").
pub fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "no such file or directory".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied".into(),
        Some(libc::ELOOP) => "too many levels of symbolic links".into(),
        Some(libc::ENOTDIR) => "not a directory (a component of the path is a file)".into(),
        Some(libc::ENAMETOOLONG) => "file name too long".into(),
        Some(libc::EISDIR) => "is a directory".into(),
        _ => e.to_string(),
    }
}

/// The trace files named by `paths`: files as given, directories listed (their trace files,
/// sorted; not recursive). A path that is missing, unreadable, a symlink loop, a FIFO, a
/// device or a socket is an error naming it (all such paths in one error, a line each); in
/// a directory, an entry with a trace file's name that is not a regular file (FIFO, device,
/// directory, dangling or looping symlink) is skipped with a note on stderr (an unreadable
/// one is left to [`for_each_line`], whose error names it). Nothing is opened that could
/// block (FIFOs are never opened).
pub fn collect(paths: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    let mut kind_of_first = None;
    let mut fail = |p: &Path, what: String, k: io::ErrorKind| {
        kind_of_first.get_or_insert(k);
        bad.push(format!("{}: {what}", p.display()));
    };
    for p in paths {
        match std::fs::metadata(p) {
            Err(e) => fail(p, describe(&e), e.kind()),
            Ok(m) if m.is_dir() => match walk(p) {
                Ok(v) => out.extend(v),
                Err(e) => fail(p, describe(&e), e.kind()),
            },
            Ok(m) if m.is_file() => match open(p) {
                Ok(_) => out.push(p.clone()),
                Err(e) => fail(p, describe(&e), e.kind()),
            },
            Ok(m) => fail(
                p,
                format!("{}: not read", kind(m.file_type())),
                io::ErrorKind::InvalidInput,
            ),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(io::Error::new(
            kind_of_first.unwrap_or(io::ErrorKind::InvalidInput),
            bad.join("\ndftracer: "),
        ))
    }
}

/// The trace files of directory `dir` (sorted).
fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if is_trace_name(&e.path()) {
            entries.push(e);
        }
    }
    entries.sort_by_key(|e| e.file_name());
    let mut found = Vec::new();
    for e in entries {
        let path = e.path();
        let t = match e.file_type() {
            Ok(t) if t.is_symlink() => std::fs::metadata(&path).map(|m| m.file_type()),
            r => r,
        };
        match t {
            Ok(t) if t.is_file() => found.push(path),
            Ok(t) => eprintln!("dftracer: note: {}: {}: skipped", path.display(), kind(t)),
            Err(e) => eprintln!(
                "dftracer: note: {}: {}: skipped",
                path.display(),
                describe(&e)
            ),
        }
    }
    Ok(found)
}

/// Opens a file for reading without ever blocking on it (`O_NONBLOCK`: a FIFO swapped in
/// after `collect` looked is refused below, not waited on).
fn open(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

fn is_trace_name(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    [".pfw", ".pfw.gz", ".json", ".json.gz"]
        .iter()
        .any(|s| n.ends_with(s))
}

/// What went wrong reading a file (the lines before it were delivered).
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The gzip stream ends inside a member, or a member is corrupt.
    Gzip(io::Error),
    /// Not a regular file (what it is).
    NotRegular(&'static str),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "read error: {}", describe(e)),
            ReadError::Gzip(e) => write!(f, "gzip error (truncated or corrupt member): {e}"),
            ReadError::NotRegular(k) => write!(f, "{k}: not read"),
        }
    }
}

/// Lines over [`MAX_LINE`] that were skipped.
#[derive(Debug, Default, Clone)]
pub struct LongLines {
    pub count: u64,
    /// The first few: (line number from 1, length in bytes without the newline).
    pub first: Vec<(u64, u64)>,
}

impl LongLines {
    fn add(&mut self, line: u64, len: u64) {
        self.count += 1;
        if self.first.len() < 3 {
            self.first.push((line, len));
        }
    }

    /// "line 2 (1073741836 bytes) is over the 16 MiB line limit (skipped)", or None.
    pub fn describe(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let at: Vec<String> = self
            .first
            .iter()
            .map(|(l, n)| format!("line {l} ({n} bytes)"))
            .collect();
        Some(format!(
            "{}{} {} over the {} MiB line limit (skipped)",
            at.join(", "),
            if self.count > self.first.len() as u64 {
                format!(" and {} more", self.count - self.first.len() as u64)
            } else {
                String::new()
            },
            if self.count == 1 { "is" } else { "are" },
            MAX_LINE >> 20
        ))
    }
}

/// What reading a file produced.
#[derive(Debug, Default, Clone)]
pub struct ReadStats {
    /// Decompressed bytes.
    pub bytes: u64,
    /// Lines, skipped ones included.
    pub lines: u64,
    /// The last line had no newline.
    pub unterminated: bool,
    /// Lines over [`MAX_LINE`] (not delivered).
    pub long: LongLines,
}

/// Calls `f(n, line)` with every line of `path` and its number from 1 (without the newline;
/// `\r\n` kept as is), decompressing gzip; lines over [`MAX_LINE`] are skipped (see
/// [`ReadStats::long`]). `progress` counts compressed bytes read so far. Only regular files
/// are read (a FIFO or a device is an error, never waited on).
pub fn for_each_line(
    path: &Path,
    progress: &AtomicU64,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<ReadStats, ReadError> {
    let mut file = open(path).map_err(ReadError::Io)?;
    let t = file.metadata().map_err(ReadError::Io)?.file_type();
    if !t.is_file() {
        return Err(ReadError::NotRegular(kind(t)));
    }
    let mut magic = [0u8; 2];
    let n = read_full(&mut file, &mut magic).map_err(ReadError::Io)?;
    let counted = Counted {
        inner: std::io::Cursor::new(magic[..n].to_vec()).chain(file),
        progress,
    };
    if n == 2 && magic == [0x1f, 0x8b] {
        let gz = flate2::read::MultiGzDecoder::new(io::BufReader::with_capacity(1 << 20, counted));
        lines(gz, &mut f, true, MAX_LINE)
    } else {
        lines(counted, &mut f, false, MAX_LINE)
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

struct Counted<'a, R> {
    inner: R,
    progress: &'a AtomicU64,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Splits a stream into lines with one reusable buffer. A line longer than the buffer grows
/// it, up to `max + 1` bytes; a line longer than `max` is dropped as it is read (the buffer
/// goes back to its first size and only the next newline is looked for), then counted in
/// [`ReadStats::long`].
fn lines(
    mut r: impl Read,
    f: &mut impl FnMut(u64, &[u8]),
    gz: bool,
    max: usize,
) -> Result<ReadStats, ReadError> {
    let chunk = CHUNK.min(max + 1);
    let mut buf = vec![0u8; chunk];
    let mut have = 0; // bytes in buf[..have] not yet delivered
    let mut out = ReadStats::default();
    // The length so far of a line over `max` being skipped (nothing of it is held).
    let mut skipping: Option<u64> = None;
    loop {
        if have == buf.len() {
            if buf.len() > max {
                // buf holds one line, no newline yet, longer than `max`: drop it.
                skipping = Some(have as u64);
                have = 0;
                buf.truncate(chunk);
                buf.shrink_to(chunk);
            } else {
                buf.resize((buf.len() * 2).min(max + 1), 0);
            }
        }
        let n = match r.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(if gz {
                    ReadError::Gzip(e)
                } else {
                    ReadError::Io(e)
                })
            }
        };
        out.bytes += n as u64;
        let end = have + n;
        let mut start = 0;
        if let Some(len) = skipping {
            // have == 0: the buffer holds only bytes of the long line, or its end.
            match memchr::memchr(b'\n', &buf[..end]) {
                None => {
                    skipping = Some(len + end as u64);
                    continue;
                }
                Some(p) => {
                    out.lines += 1;
                    out.long.add(out.lines, len + p as u64);
                    skipping = None;
                    start = p + 1;
                }
            }
        }
        // Only the new bytes can hold the next newline.
        let mut search = have.max(start);
        while let Some(p) = memchr::memchr(b'\n', &buf[search..end]) {
            let nl = search + p;
            out.lines += 1;
            f(out.lines, &buf[start..nl]);
            start = nl + 1;
            search = start;
        }
        buf.copy_within(start..end, 0);
        have = end - start;
        if buf.len() > chunk && have < chunk / 2 {
            buf.truncate(chunk);
            buf.shrink_to(chunk);
        }
    }
    if let Some(len) = skipping {
        out.lines += 1;
        out.long.add(out.lines, len);
        out.unterminated = true;
    } else if have > 0 {
        out.lines += 1;
        f(out.lines, &buf[..have]);
        out.unterminated = true;
    }
    Ok(out)
}

/// Runs `work(index, path)` for every file on up to `jobs` threads (largest files first, so
/// one big file does not start last); results come back in input order.
pub fn parallel<T: Send>(
    files: &[PathBuf],
    jobs: usize,
    work: impl Fn(usize, &Path) -> T + Sync,
) -> Vec<T> {
    let mut order: Vec<usize> = (0..files.len()).collect();
    let size = |i: &usize| std::fs::metadata(&files[*i]).map(|m| m.len()).unwrap_or(0);
    order.sort_by_key(|i| std::cmp::Reverse(size(i)));
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<T>>> =
        files.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, files.len().max(1)) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let r = work(i, &files[i]);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every file was processed")
        })
        .collect()
}

/// The number of worker threads: `--jobs`, else one per core.
pub fn jobs(requested: Option<usize>) -> usize {
    requested
        .filter(|&j| j > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Prints progress on stderr every 2 s while `total` compressed bytes are read, if the
/// input is large enough to take that long; stops when `done` is set.
pub fn progress_thread<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    label: &'static str,
    read: &'s AtomicU64,
    total: u64,
    done: &'s std::sync::atomic::AtomicBool,
) {
    s.spawn(move || {
        let t0 = Instant::now();
        let mut last = t0;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            if last.elapsed() >= Duration::from_secs(2) {
                last = Instant::now();
                let r = read.load(Ordering::Relaxed);
                eprintln!(
                    "{label}: {:.0}% ({} of {} MB read, {:.0} s)",
                    100.0 * r as f64 / total.max(1) as f64,
                    r / 1_000_000,
                    total / 1_000_000,
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    });
}

/// Total size on disk of `files`.
pub fn total_size(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out at most `step` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    type Lines = Vec<(u64, Vec<u8>)>;

    fn split(data: &[u8], max: usize, step: usize) -> (Lines, ReadStats) {
        let mut got = Vec::new();
        let st = lines(
            Trickle { data, step },
            &mut |n, l: &[u8]| got.push((n, l.to_vec())),
            false,
            max,
        )
        .unwrap();
        (got, st)
    }

    /// The same by `split` on a slice.
    fn oracle(data: &[u8], max: usize) -> (Lines, Vec<(u64, u64)>, u64, bool) {
        let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        let unterminated = !parts.last().unwrap().is_empty();
        if !unterminated {
            parts.pop();
        }
        let (mut good, mut long) = (Vec::new(), Vec::new());
        for (i, p) in parts.iter().enumerate() {
            let n = i as u64 + 1;
            if p.len() > max {
                long.push((n, p.len() as u64));
            } else {
                good.push((n, p.to_vec()));
            }
        }
        (good, long, parts.len() as u64, unterminated)
    }

    #[test]
    fn lines_over_the_limit_are_skipped_and_numbered_at_every_boundary() {
        let texts: [&[u8]; 6] = [
            b"a\nbb\nccc\ndddd\neeeee\n",
            b"abcdefghijkl\nx\n\nyz\nabcdefghijklmnopq",
            b"\n\n\nabcdefgh",
            b"abcd",
            b"",
            b"0123456789abcdef0123\n0123\n01234\n012345678\n",
        ];
        for data in texts {
            for max in 1..=9 {
                for step in 1..=11 {
                    let (got, st) = split(data, max, step);
                    let (want, long, n, unterminated) = oracle(data, max);
                    let ctx = format!("{:?} max {max} step {step}", String::from_utf8_lossy(data));
                    assert_eq!(got, want, "{ctx}");
                    assert_eq!(st.lines, n, "{ctx}");
                    assert_eq!(st.unterminated, unterminated, "{ctx}");
                    assert_eq!(st.long.count, long.len() as u64, "{ctx}");
                    let first: Vec<_> = long.iter().take(3).copied().collect();
                    assert_eq!(st.long.first, first, "{ctx}");
                    assert_eq!(st.bytes, data.len() as u64, "{ctx}");
                }
            }
        }
    }

    #[test]
    fn a_line_at_the_limit_is_delivered_one_over_it_is_reported() {
        // The real limit, through the real buffer sizes: a line of exactly MAX_LINE bytes
        // arrives whole, one of MAX_LINE + 1 is reported.
        let mut data = vec![b'x'; MAX_LINE];
        data.push(b'\n');
        data.extend(std::iter::repeat_n(b'y', MAX_LINE + 1));
        data.extend_from_slice(b"\n{}\n");
        let mut got = Vec::new();
        let st = lines(
            &data[..],
            &mut |n, l: &[u8]| got.push((n, l.len())),
            false,
            MAX_LINE,
        )
        .unwrap();
        assert_eq!(got, vec![(1, MAX_LINE), (3, 2)]);
        assert_eq!(st.long.first, vec![(2, MAX_LINE as u64 + 1)]);
        assert_eq!(
            st.long.describe().unwrap(),
            format!(
                "line 2 ({} bytes) is over the 16 MiB line limit (skipped)",
                MAX_LINE + 1
            )
        );
    }

    #[test]
    fn errors_and_kinds_are_named() {
        let e = io::Error::from_raw_os_error(libc::ELOOP);
        assert_eq!(describe(&e), "too many levels of symbolic links");
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(describe(&e), "permission denied");
        let t = std::fs::metadata("/dev/null").unwrap().file_type();
        assert_eq!(kind(t), "is a character device");
    }
}
