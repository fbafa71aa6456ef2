//! Trace files in: directories are listed (`*.pfw`, `*.pfw.gz`, and `*.json`/`*.json.gz`
//! for Chrome-style traces), gzip is recognised by its magic bytes (any number of members),
//! lines are handed out one at a time from a fixed buffer (memory does not grow with the
//! file), and files are shared out to one worker thread per core.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The trace files named by `paths` (files as given, directories listed, sorted).
pub fn collect(paths: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && is_trace_name(f))
                .collect();
            found.sort();
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file or directory", p.display()),
            ));
        }
    }
    Ok(out)
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
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "read error: {e}"),
            ReadError::Gzip(e) => write!(f, "gzip error (truncated or corrupt member): {e}"),
        }
    }
}

/// What reading a file produced.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadStats {
    /// Decompressed bytes.
    pub bytes: u64,
    pub lines: u64,
    /// The last line had no newline.
    pub unterminated: bool,
}

/// Calls `f` with every line of `path` (without the newline; `\r\n` kept as is), decompressing
/// gzip. `progress` counts compressed bytes read so far.
pub fn for_each_line(
    path: &Path,
    progress: &AtomicU64,
    mut f: impl FnMut(&[u8]),
) -> Result<ReadStats, ReadError> {
    let mut file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let mut magic = [0u8; 2];
    let n = read_full(&mut file, &mut magic).map_err(ReadError::Io)?;
    let counted = Counted {
        inner: std::io::Cursor::new(magic[..n].to_vec()).chain(file),
        progress,
    };
    if n == 2 && magic == [0x1f, 0x8b] {
        let gz = flate2::read::MultiGzDecoder::new(io::BufReader::with_capacity(1 << 20, counted));
        lines(gz, &mut f, true)
    } else {
        lines(counted, &mut f, false)
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

/// Splits a stream into lines with one reusable buffer (a line longer than the buffer grows
/// it; nothing else does).
fn lines(mut r: impl Read, f: &mut impl FnMut(&[u8]), gz: bool) -> Result<ReadStats, ReadError> {
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    let mut have = 0; // bytes in buf[..have] not yet delivered
    let mut out = ReadStats::default();
    loop {
        if have == buf.len() {
            buf.resize(buf.len() * 2, 0);
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
        // Only the new bytes can hold the next newline.
        let mut search = have;
        while let Some(p) = memchr::memchr(b'\n', &buf[search..end]) {
            let nl = search + p;
            f(&buf[start..nl]);
            out.lines += 1;
            start = nl + 1;
            search = start;
        }
        buf.copy_within(start..end, 0);
        have = end - start;
        if buf.len() > CHUNK && have < CHUNK / 2 {
            buf.truncate(CHUNK);
            buf.shrink_to(CHUNK);
        }
    }
    if have > 0 {
        f(&buf[..have]);
        out.lines += 1;
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
