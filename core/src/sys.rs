//! The only libc calls of the core: clocks, ids, host and process facts, stderr, process hooks
//! (atexit, atfork, signals) and the writer thread. Each unsafe block says why it is sound.
#![allow(unsafe_code)]

/// Nanoseconds since the epoch from `CLOCK_REALTIME` (vDSO: no syscall).
#[inline]
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Nanoseconds of `CLOCK_MONOTONIC`, for intervals.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() as u32 }
}

pub fn getppid() -> u32 {
    // SAFETY: getppid cannot fail.
    unsafe { libc::getppid() as u32 }
}

/// Full hostname (`gethostname`), `localhost` if it cannot be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its full length; gethostname NUL-terminates within it or
    // truncates, and we bound the scan by the length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The process's argv from `/proc/self/cmdline` (every element, the last one included).
pub fn cmdline() -> Vec<String> {
    match std::fs::read("/proc/self/cmdline") {
        Ok(raw) => raw
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
        Err(_) => std::env::args().collect(),
    }
}

/// The reference's exec-name rule, with its off-by-one fixed: the basename of the first argv
/// element that does not start with `-` and contains neither `python`, `env` nor
/// `multiprocessing`; `DEFAULT` (or `DEFAULT-spawn` after a multiprocessing token) otherwise.
pub fn exec_name(argv: &[String]) -> String {
    let mut last_mp = false;
    for arg in argv {
        let base = arg.rsplit('/').next().unwrap_or(arg);
        last_mp = base.contains("multiprocessing");
        if base.is_empty()
            || base.starts_with('-')
            || base.contains("python")
            || base.contains("env")
            || last_mp
        {
            continue;
        }
        return base.to_string();
    }
    if last_mp {
        "DEFAULT-spawn".into()
    } else {
        "DEFAULT".into()
    }
}

pub fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `asctime(localtime(now))` without the newline, e.g. `Sun Nov 29 21:38:13 2026`.
pub fn asctime_now() -> String {
    // SAFETY: time(NULL) is always valid; localtime_r writes into our tm; strftime writes at
    // most buf.len() bytes and returns the count written.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return String::new();
        }
        let mut buf = [0u8; 64];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%a %b %e %H:%M:%S %Y".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// Writes one line to fd 2 with a single `write` (no stdout, no std lock), keeping errno.
pub fn eprint_line(msg: &str) {
    let mut line = Vec::with_capacity(msg.len() + 1);
    line.extend_from_slice(msg.as_bytes());
    if !msg.ends_with('\n') {
        line.push(b'\n');
    }
    let saved = errno();
    // SAFETY: the buffer is valid for its length; a short or failed write to stderr is
    // ignored on purpose (there is nowhere else to report it).
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    set_errno(saved);
}

/// `access(path, W_OK|X_OK) == 0`.
pub fn dir_writable(path: &str) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Lowest descriptor number the tracer moves its files to: far above what programs use
/// (shells keep their own at 10 and up, `exec 3>` and close loops work low), below the soft
/// `RLIMIT_NOFILE` (F_DUPFD fails at or above it) and at most about 4,000 so the kernel's
/// descriptor table stays small: `min(limit, 4096) - 64`, or the last number below a limit
/// under 128 (`ulimit -n 16`: 15; a program numbering its files from 3 up gets 3..14). 0 when
/// no such number exists (the file keeps its fd).
///
/// With other threads running, the top is also the descriptor table the kernel already has
/// ([`shared_fd_table`]: 64 slots in a fresh process, so number 63): growing a table that
/// threads share waits for an RCU grace period, during which every other thread's `open`
/// waits too (5 to 18 ms for `initialize_log` after `import numpy`, whose BLAS threads are
/// running, against 0.4 ms single-threaded).
pub fn high_fd_floor() -> i32 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 0;
    }
    let mut top = rl.rlim_cur.min(4096) as i32;
    if top > 64 {
        if let Some(size) = shared_fd_table() {
            top = top.min(size);
        }
    }
    if top < 128 {
        // Above the three standard streams, or nothing to gain.
        return if top > 4 { top - 1 } else { 0 };
    }
    top - 64
}

/// The size of the kernel's descriptor table (`FDSize` in `/proc/self/status`) when the
/// process has more than one thread, else (or when it cannot be read) None. No allocation,
/// only system calls: async-signal-safe.
fn shared_fd_table() -> Option<i32> {
    // SAFETY: a static NUL-terminated path; the flags are valid.
    let fd = unsafe {
        libc::open(
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: the destination is the unused rest of `buf`.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    close_fd(fd);
    let (size, threads) = parse_status(&buf[..len]);
    match (size, threads) {
        (Some(size), Some(threads)) if threads > 1 => Some(size.min(i32::MAX as u64) as i32),
        _ => None,
    }
}

/// `FDSize` and `Threads` of a `/proc/<pid>/status` text.
fn parse_status(text: &[u8]) -> (Option<u64>, Option<u64>) {
    let field = |name: &[u8]| {
        text.split(|&b| b == b'\n').find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(b":")?;
            let digits = rest.trim_ascii();
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            digits.iter().try_fold(0u64, |v, &d| {
                v.checked_mul(10)?.checked_add((d - b'0') as u64)
            })
        })
    };
    (field(b"FDSize"), field(b"Threads"))
}

/// Moves `fd` (ours) to a descriptor at or above [`high_fd_floor`], close-on-exec; returns the
/// descriptor to use (`fd` itself when there is no free number up there). Async-signal-safe.
fn move_high(fd: i32) -> i32 {
    let floor = high_fd_floor();
    if floor > fd {
        // SAFETY: fd is ours and open; F_DUPFD_CLOEXEC only creates a new descriptor.
        let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
        if high >= 0 {
            close_fd(fd);
            return high;
        }
    }
    fd
}

/// A placeholder descriptor that holds one slot of the descriptor table for the trace file
/// (`sink::reserve`): an empty memfd (a pipe's read end where memfd_create is refused), whose
/// inode no other file shares, so a number the program took over is told apart from it.
/// Moved high (as [`open_trace_fd`]) and close-on-exec. Only system calls:
/// async-signal-safe (a fork child's handler takes one).
pub fn reserve_fd() -> Option<(i32, (u64, u64))> {
    // SAFETY: a static NUL-terminated name; MFD_CLOEXEC is a valid flag.
    let mut fd = unsafe { libc::memfd_create(c"dftracer-reserve".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        let mut p = [-1i32; 2];
        // SAFETY: `p` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        close_fd(p[1]);
        fd = p[0];
    }
    let fd = move_high(fd);
    match fd_identity(fd) {
        Some(id) => Some((fd, id)),
        None => {
            close_fd(fd);
            None
        }
    }
}

/// Opens `path` for writing, close-on-exec, and moves it to a descriptor at or above
/// [`high_fd_floor`]. `create`: the file must not exist (`O_EXCL`); else it must.
///
/// Never through a symbolic link (`O_NOFOLLOW`: ELOOP) and never onto anything but a regular
/// file: the open is non-blocking (a FIFO planted at the path must not hang the program: a
/// blocking open waits for a reader forever), then `fstat` must say regular file (else the
/// descriptor is closed and the error names what the path is), and only then is `O_NONBLOCK`
/// cleared.
pub fn open_trace_fd(path: &str, create: bool) -> std::io::Result<i32> {
    let c = std::ffi::CString::new(path)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut flags = libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    if create {
        flags |= libc::O_CREAT | libc::O_EXCL;
    }
    // SAFETY: c is a valid NUL-terminated path; the mode is passed as the variadic argument.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let what = match e.raw_os_error() {
            Some(libc::ELOOP) => "a symbolic link is at its name, not followed",
            // O_WRONLY|O_NONBLOCK on a FIFO that no one reads (or a device without its driver).
            Some(libc::ENXIO) => "a fifo (or device) is at its name, not a regular file; refused",
            _ => return Err(e),
        };
        return Err(std::io::Error::new(e.kind(), format!("{what} ({e})")));
    }
    if let Err(e) = regular_blocking(fd) {
        close_fd(fd);
        return Err(e);
    }
    Ok(move_high(fd))
}

/// `Ok` when `fd` is a regular file, after clearing its `O_NONBLOCK`; else an error saying
/// what it is (a fifo, a directory, ...).
pub fn regular_blocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: an all-zero `stat` is a valid value; fstat writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer; fd is the caller's open descriptor.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        let what = match st.st_mode & libc::S_IFMT {
            libc::S_IFIFO => "a fifo",
            libc::S_IFDIR => "a directory",
            libc::S_IFCHR => "a character device",
            libc::S_IFBLK => "a block device",
            libc::S_IFSOCK => "a socket",
            _ => "not a regular file",
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file; refused"),
        ));
    }
    // SAFETY: F_GETFL/F_SETFL on the caller's open descriptor.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(())
}

/// Device and inode of the file behind `fd` (`None` if `fd` is not open).
pub fn fd_identity(fd: i32) -> Option<(u64, u64)> {
    if fd < 0 {
        return None;
    }
    // SAFETY: an all-zero `stat` is a valid value; fstat writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat buffer; fstat on any int is safe (EBADF).
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Writes all of `data` at `offset` (positional: a shared or moved file offset is ignored).
pub fn pwrite_all(fd: i32, mut data: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !data.is_empty() {
        // SAFETY: the buffer is valid for its length.
        let n =
            unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), offset as libc::off_t) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
        }
        data = &data[n as usize..];
        offset += n as u64;
    }
    Ok(())
}

/// Cuts the file behind `fd` back to `len` bytes.
pub fn truncate_fd(fd: i32, len: u64) -> std::io::Result<()> {
    // SAFETY: ftruncate on any int is safe (EBADF/EINVAL on misuse).
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists (`AlreadyExists`): `renameat2(RENAME_NOREPLACE)`,
/// or a hard link and an unlink where the file system does not support it.
pub fn rename_noreplace(from: &str, to: &str) -> std::io::Result<()> {
    let cstr = |s: &str| {
        std::ffi::CString::new(s)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: both are valid NUL-terminated paths.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) && e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    // SAFETY: as above; link fails with EEXIST instead of replacing.
    if unsafe { libc::link(f.as_ptr(), t.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    unsafe { libc::unlink(f.as_ptr()) };
    Ok(())
}

/// Closes `fd` (async-signal-safe).
pub fn close_fd(fd: i32) {
    // SAFETY: the caller owns `fd`.
    unsafe { libc::close(fd) };
}

/// The name of the pseudo filesystem `path` is on (proc, sysfs, devpts, cgroup, ...: places
/// that cannot hold regular trace files), or `None` for an ordinary one (or when `statfs`
/// fails: the callers' own checks then report the problem).
pub fn pseudo_fs(path: &str) -> Option<&'static str> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: an all-zero statfs is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // linux/magic.h
    Some(match st.f_type as u64 {
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        0x1cd1 => "devpts",
        0x0027_e0eb => "cgroup",
        0x6367_7270 => "cgroup2",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0xcafe_4a11 => "bpf",
        0x6265_6570 => "configfs",
        0x6165_676c => "pstore",
        0xde5e_81e4 => "efivarfs",
        0x6573_5543 => "fusectl",
        _ => return None,
    })
}

/// True when the calling thread is the only thread of the process (`/proc/self/stat`'s
/// `num_threads`), so nothing else can be reading the environment while it is changed.
/// False when that cannot be read.
pub fn single_threaded() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // Fields after the command name (which may hold spaces and parentheses): state is
    // field 3, num_threads field 20.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17))
        .and_then(|n| n.parse::<u64>().ok())
        == Some(1)
}

pub fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(v: i32) {
    // SAFETY: as above; writing the thread's own errno.
    unsafe { *libc::__errno_location() = v };
}

/// Registers `f` to run at `exit()`.
pub fn at_exit(f: extern "C" fn()) {
    // SAFETY: f is a plain `extern "C" fn()` with static lifetime.
    unsafe { libc::atexit(f) };
}

/// Registers `prepare` to run in the forking thread before `fork()` and `child` in the child
/// after it.
pub fn at_fork(prepare: unsafe extern "C" fn(), child: unsafe extern "C" fn()) {
    // SAFETY: handlers are static functions; None for the parent's is allowed.
    unsafe { libc::pthread_atfork(Some(prepare), None, Some(child)) };
}

/// Starts a native thread running `f(arg)` with the signals of `blocked` blocked (the tracer
/// passes the asynchronous ones, so a process signal is never delivered to the writer: the
/// writer is what serves it, and a program's handler must not run on it). Uses pthread_create directly
/// so that it also works from a fork child.
///
/// # Safety
/// `arg` must stay valid for as long as `f` uses it.
pub unsafe fn spawn_thread(
    f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
    blocked: libc::sigset_t,
) -> Option<libc::pthread_t> {
    // The new thread inherits the blocked mask; this thread's mask is restored on drop.
    let _blocked = SignalBlock::new(blocked);
    let mut tid: libc::pthread_t = 0;
    // SAFETY: pthread_create gets a static fn and the caller's argument (valid: see # Safety).
    let rc = unsafe { libc::pthread_create(&mut tid, std::ptr::null(), f, arg) };
    (rc == 0).then_some(tid)
}

pub fn join_thread(t: libc::pthread_t) {
    // SAFETY: t came from spawn_thread in this process and is joined once.
    unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
}

/// Lets `t` end on its own (its resources are freed when it does): never joined after.
pub fn detach_thread(t: libc::pthread_t) {
    // SAFETY: t came from spawn_thread in this process and is neither joined nor detached yet.
    unsafe { libc::pthread_detach(t) };
}

/// A POSIX semaphore used as the writer's wake-up: `post` is async-signal-safe, so a signal
/// handler can wake the writer.
pub struct Wake(Box<std::cell::UnsafeCell<libc::sem_t>>);

// SAFETY: sem_t is designed for concurrent use from many threads through its pointer.
unsafe impl Sync for Wake {}
// SAFETY: as above.
unsafe impl Send for Wake {}

impl Wake {
    pub fn new() -> Wake {
        // SAFETY: zeroed sem_t is then initialised by sem_init before any use.
        let w = Wake(Box::new(std::cell::UnsafeCell::new(unsafe {
            std::mem::zeroed()
        })));
        // SAFETY: the semaphore lives in a stable heap allocation.
        unsafe { libc::sem_init(w.0.get(), 0, 0) };
        w
    }
    /// Async-signal-safe.
    pub fn post(&self) {
        // SAFETY: initialised semaphore.
        unsafe { libc::sem_post(self.0.get()) };
    }
    /// Waits until posted or `ms` elapsed. Returns true if posted.
    pub fn wait_ms(&self, ms: u64) -> bool {
        let deadline = realtime_ns() + ms * 1_000_000;
        let ts = libc::timespec {
            tv_sec: (deadline / 1_000_000_000) as _,
            tv_nsec: (deadline % 1_000_000_000) as _,
        };
        loop {
            // SAFETY: initialised semaphore, valid timespec.
            let rc = unsafe { libc::sem_timedwait(self.0.get(), &ts) };
            if rc == 0 {
                return true;
            }
            if errno() != libc::EINTR {
                return false;
            }
        }
    }
}

impl Default for Wake {
    fn default() -> Self {
        Wake::new()
    }
}

/// Blocks the signals of `set` on this thread until dropped (they stay pending). The tracer
/// passes the asynchronous signals (`signals::async_set`: all but SIGKILL, SIGSTOP and the
/// faults), so that neither its handler nor a program's own (which may re-raise into ours)
/// runs while this thread holds a lock the writer needs.
pub struct SignalBlock(libc::sigset_t);

impl SignalBlock {
    pub fn new(set: libc::sigset_t) -> SignalBlock {
        // SAFETY: `set` is initialised; the old mask is saved for drop.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SignalBlock(old)
        }
    }
}

impl Drop for SignalBlock {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in new(), on the same thread.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Sleeps `us` microseconds (async-signal-safe: nanosleep only).
pub fn sleep_us(us: u64) {
    let ts = libc::timespec {
        tv_sec: (us / 1_000_000) as _,
        tv_nsec: ((us % 1_000_000) * 1000) as _,
    };
    // SAFETY: valid timespec; an early wake (EINTR) is harmless for our callers.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// Async-signal-safe sleep.
pub fn sleep_ms(ms: u64) {
    sleep_us(ms.saturating_mul(1000));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exec_name_rules() {
        assert_eq!(
            exec_name(&v(&["/usr/bin/python3", "script.py"])),
            "script.py"
        );
        assert_eq!(
            exec_name(&v(&["python", "-u", "dir/train.py", "3"])),
            "train.py"
        );
        assert_eq!(exec_name(&v(&["./io", "a"])), "io");
        assert_eq!(exec_name(&v(&["python3"])), "DEFAULT");
        assert_eq!(
            exec_name(&v(&[
                "python3",
                "-c",
                "from multiprocessing.spawn import spawn_main"
            ])),
            "DEFAULT-spawn"
        );
    }

    #[test]
    fn status_fields() {
        let text = b"Name:\tpython3\nFDSize:\t64\nGroups:\t\nVmRSS:\t  1024 kB\nThreads:\t5\n";
        assert_eq!(parse_status(text), (Some(64), Some(5)));
        assert_eq!(parse_status(b"FDSize:\t\nThreads:\tx\n"), (None, None));
        assert_eq!(parse_status(b"Name:\tFDSize: 3\n"), (None, None));
        // With a second thread alive, the real table is reported.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        let size = shared_fd_table().expect("two threads here");
        assert!(size >= 64 && size.count_ones() == 1, "{size}");
        drop(tx);
        let _ = t.join();
    }
}
