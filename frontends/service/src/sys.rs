//! The service's only libc calls: signal mask and wait, `kill`, pipes, opening its own files
//! in `log_dir` safely, and the detach (fork, setsid, fork, redirect, exec). Everything else
//! uses std.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The signals that stop the service gracefully.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// A set of blocked signals that the sampling loop waits on with `sigtimedwait`.
pub struct SignalWait {
    set: libc::sigset_t,
}

impl SignalWait {
    /// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later,
    /// such as the core's writer, inherit the mask), so that they are only ever consumed by
    /// [`SignalWait::wait`]: no handler, no async-signal-safety concerns.
    pub fn block() -> SignalWait {
        // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only
        // reads it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in STOP_SIGNALS {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            SignalWait { set }
        }
    }

    /// Sleeps up to `timeout`, returning a stop signal if one arrived.
    pub fn wait(&self, timeout: Duration) -> Option<i32> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: valid set and timespec; a null siginfo pointer is allowed.
        let rc = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
        // EAGAIN (timeout) and EINTR (another signal) both mean "no stop signal".
        (rc > 0).then_some(rc)
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "signal",
    }
}

/// `kill(pid, sig)`.
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if pid <= 0 {
        // Never 0 or -1: those address process groups or everyone.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: plain syscall on a positive pid.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What `meta` is, in words, for a refusal.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a fifo"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` (an `O_NOFOLLOW | O_NONBLOCK` open, then `fstat`) and makes sure it is a
/// regular file of its own: a symbolic link (`ELOOP`), a FIFO (a blocking open would wait
/// for a reader forever), a device, a directory or a file with other hard links is refused
/// with an error naming the path and what it is. `O_NONBLOCK` is cleared once checked.
fn open_checked(
    path: &std::path::Path,
    opts: &mut std::fs::OpenOptions,
) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let refuse = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {what}", path.display()),
        )
    };
    let f = opts
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse(format!(
                "is a symbolic link; refusing to open it through the link (remove it): {e}"
            )),
            Some(libc::ENXIO) => refuse(format!(
                "is a fifo or a device, not a regular file; refused: {e}"
            )),
            _ => refuse(e.to_string()),
        })?;
    let meta = f.metadata().map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() {
        return Err(refuse(format!(
            "is {}, not a regular file; refused",
            kind_of(&meta)
        )));
    }
    if meta.nlink() > 1 {
        return Err(refuse(format!(
            "has {} hard links; refusing to write a file that other names share (remove it)",
            meta.nlink()
        )));
    }
    // SAFETY: F_GETFL/F_SETFL on the descriptor `f` owns.
    unsafe {
        let fd = f.as_raw_fd();
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}

/// Opens one of the service's files in `log_dir` (`.out`, `.err`) for writing, created 0644
/// if missing, never through a link or onto a non-regular file ([`open_checked`]). Not
/// truncated: the caller truncates it (`set_len(0)`) when it is time, after the check.
pub fn open_own_file(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    open_checked(
        path,
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o644),
    )
}

/// Creates `path` for writing, `O_EXCL` (an existing name, link or not, is `AlreadyExists`),
/// never through a link.
pub fn create_own_file(path: &std::path::Path, mode: u32) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Reads one of the service's files (PID file, `.out`, `.err`): only a regular file, never
/// through a link, never a blocking open of a FIFO ([`open_checked`], hard links allowed:
/// nothing is written).
pub fn read_own_file(path: &std::path::Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: is {}, not a regular file",
                path.display(),
                kind_of(&meta)
            ),
        ));
    }
    let mut v = Vec::new();
    (&f).take(16 << 20).read_to_end(&mut v)?;
    Ok(v)
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits until `fd` is readable (data or EOF) for at most `timeout`.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc > 0 {
            return true;
        }
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Everything the detached child needs, prepared before `fork` so that the child only makes
/// async-signal-safe calls (the caller may be a multi-threaded test process).
pub struct Detach {
    pub exe: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// Already opened (truncated) by the caller, so open errors surface before detaching.
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The write end of the readiness pipe; stays open across exec.
    pub ready: OwnedFd,
}

/// Double-forks: the child calls `setsid` and forks again; the grandchild points 0 at
/// /dev/null and 1/2 at the state files, closes every other descriptor but the readiness
/// pipe, moves to `/` (so that it holds no mount busy), and execs `exe`. Returns once the
/// intermediate child has exited.
///
/// Why close the rest: whoever ran `start` may have handed it descriptors without
/// close-on-exec (MPICH's Hydra proxy its PMI socket and I/O pipes, an ssh session its
/// channel). A daemon holding them keeps the launcher waiting for it to exit: `mpirun.mpich
/// -ppn 1 -n N dftracer_service start` never returned (tests/multinode).
pub fn detach(d: Detach) -> io::Result<()> {
    // Upper bound for the close loop when close_range(2) (Linux 5.9) is missing.
    let max_fd = {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid out-pointer.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0;
        if ok {
            rl.rlim_cur.min(1 << 16) as i32
        } else {
            1024
        }
    };
    let mut argv: Vec<*const libc::c_char> = d.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = d.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let devnull: &CStr = c"/dev/null";
    let root: &CStr = c"/";
    let (out, err, ready) = (
        d.stdout.as_raw_fd(),
        d.stderr.as_raw_fd(),
        d.ready.as_raw_fd(),
    );
    // SAFETY: fork; the child below only calls async-signal-safe functions (setsid, fork,
    // open, dup2, fcntl, chdir, execve, write, _exit) on data prepared above, and never
    // returns into Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is valid for the duration of these calls.
        unsafe {
            libc::setsid();
            let second = libc::fork();
            if second != 0 {
                libc::_exit(if second < 0 { 1 } else { 0 });
            }
            let null = libc::open(devnull.as_ptr(), libc::O_RDWR);
            if null >= 0 {
                libc::dup2(null, 0);
            }
            libc::dup2(out, 1);
            libc::dup2(err, 2);
            // The readiness pipe must survive exec; its fd number is in argv.
            let flags = libc::fcntl(ready, libc::F_GETFD);
            libc::fcntl(ready, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            close_all_but(ready, max_fd);
            libc::chdir(root.as_ptr());
            libc::execve(d.exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            let msg = b"error cannot exec the service binary\n";
            libc::write(ready, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    drop(d.ready);
    Ok(())
}

/// Closes descriptors from 3 up, except `keep`: close_range(2), else one close(2) each below
/// `max_fd`. Async-signal-safe (raw system calls only): it runs between fork and exec.
///
/// # Safety
/// Only in a forked child about to exec: descriptors other code owns are closed under it.
unsafe fn close_all_but(keep: i32, max_fd: i32) {
    let range = |lo: i32, hi: u32| -> bool {
        // SAFETY: close_range on descriptors this child owns; no memory is passed.
        lo as u32 > hi || unsafe { libc::syscall(libc::SYS_close_range, lo as u32, hi, 0u32) } == 0
    };
    let done = if keep >= 3 {
        range(3, (keep - 1) as u32) && range(keep + 1, u32::MAX)
    } else {
        range(3, u32::MAX)
    };
    if !done {
        for fd in 3..max_fd {
            if fd != keep {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Makes sure descriptors 0, 1 and 2 are open (on /dev/null if they were closed), so that
/// files opened later never take those numbers and get clobbered by the detach's `dup2`s.
pub fn ensure_std_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor; open is given a valid C string. A
        // descriptor opened here is deliberately leaked: it *is* the process's fd 0/1/2.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1 {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

/// Takes ownership of an inherited descriptor (the readiness pipe), if it is open, and marks
/// it close-on-exec.
pub fn adopt_fd(fd: i32) -> Option<std::fs::File> {
    if fd < 3 {
        return None;
    }
    // SAFETY: F_GETFD/F_SETFD only act on the descriptor number; from_raw_fd takes ownership
    // of a descriptor that nothing else in this process uses (it was passed to us by `start`
    // for exactly this purpose and is adopted at most once, at startup).
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags == -1 {
            return None;
        }
        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        Some(std::fs::File::from_raw_fd(fd))
    }
}

/// Sets the calling thread's timer slack (inherited by threads it creates later): the kernel
/// may delay this thread's timed wake-ups by up to `ns` to batch them with others.
pub fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// One malloc arena for every thread: glibc otherwise gives the core's writer thread an arena
/// of its own, with its own touched pages, for the few small allocations it makes.
pub fn single_malloc_arena() {
    // SAFETY: mallopt only adjusts allocator parameters; called before any other thread exists.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}
