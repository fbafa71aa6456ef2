//! The interposed C functions. Every shim has the same shape:
//!
//! 1. load the real function ([`real!`](crate::real!)); if the symbol is missing, fail like
//!    an unsupported call (`ENOSYS`);
//! 2. decide cheaply whether this call can be traced (mode word, fd table, `FILE*` table, or
//!    the recording guard); if not, **tail-forward** the call unchanged;
//! 3. otherwise take the time, make the real call, save `errno`, take the time, record inside
//!    [`guarded`](crate::guarded), restore `errno`, return the real result.
//!
//! Variadic C functions: Rust (stable) cannot define C-variadic functions. `open`, `open64`,
//! `openat`, `openat64` and `fcntl`/`fcntl64` are defined with their optional argument as a
//! fixed extra integer parameter (`mode`, `arg`). On x86_64 and aarch64 Linux a variadic
//! integer argument travels in the same register as the next fixed one, so the value is
//! exactly what the caller passed (or an unused register when it passed none, which the real
//! function then ignores, as it would have). The real functions are *called* through
//! variadic function-pointer types, so the callee sees a proper variadic call. `execl`,
//! `execlp` and `execle` take any number of arguments: they are naked assembly trampolines
//! (x86_64) that hand the register and stack argument areas to Rust, which rebuilds `argv`
//! exactly (see `process.rs`).
//!
//! Safety argument, once for the whole module: a shim is called by C code with the arguments
//! of the C function it replaces, and forwards exactly those arguments to the next
//! definition of that function. Its own reads (C strings, iovecs, argv) touch only memory the
//! real call itself reads. So the shims' `unsafe` operations carry the caller's C contract
//! unchanged; `unsafe_op_in_unsafe_fn` and per-block `SAFETY` comments would repeat that
//! sentence a hundred times, and are allowed here. Everything else (tables, symbol
//! resolution) documents each unsafe block.
#![allow(unsafe_code)]
#![allow(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc, clippy::undocumented_unsafe_blocks)]
// C integer types (off_t, ssize_t, ...) are i64 on some targets and not on others.
#![allow(clippy::unnecessary_cast)]

// The modules of `extern "C"` shims are left out of the unit-test build (they would interpose
// the test harness), with the table that lists them.
macro_rules! shim_modules {
    ($($m:ident),* $(,)?) => {$(
        #[cfg(not(test))]
        pub mod $m;
    )*};
}

shim_modules!(
    aio,
    chdir,
    copies,
    dirs,
    fdctl,
    hdf5,
    libs,
    links_attrs,
    maps,
    mpiio,
    posix,
    process,
    signals,
    stat,
    stdio,
    stdio_chars,
);
pub mod cwd;
pub mod inherit;
pub mod resolved;

use std::ffi::CStr;

use libc::{c_char, c_int};

use crate::table::Interned;
use crate::{filter, posix_on, stdio_on, FDS, FILES};

pub use crate::PATH_MAX;

/// An entry of the hook table: every GOT slot naming `name` will hold `addr`.
///
/// Note for `addr` taken in Rust from an *exported* function (as in [`HOOKS`]): the loader
/// binds that reference by symbol name like any other, so when this library is loaded with
/// `RTLD_LOCAL` it is libc's function; [`crate::bind::bind_io_in_process`] looks each name up
/// in this object instead.
#[derive(Clone, Copy, Debug)]
pub struct HookEntry {
    pub name: &'static CStr,
    pub addr: *const (),
    /// 0: any slot naming `name` is bound. Otherwise the one definition the hook forwards
    /// to (an HDF5 hook's, from the libhdf5 it was resolved from): only a slot holding it,
    /// or a lazy slot still pointing into its own object, is bound.
    pub real: usize,
}

// SAFETY: `addr` is the address of a function (immutable code), never dereferenced as data.
unsafe impl Sync for HookEntry {}
// SAFETY: as above.
unsafe impl Send for HookEntry {}

/// `hook_list![module::{f, ...}, ...]`: a `HookEntry` per function, named after it.
#[cfg(not(test))]
macro_rules! hook_list {
    ($($m:ident :: { $($(#[$attr:meta])* $f:ident),* $(,)? }),* $(,)?) => {
        &[$($(
            $(#[$attr])*
            HookEntry {
                name: match CStr::from_bytes_with_nul(concat!(stringify!($f), "\0").as_bytes()) {
                    Ok(c) => c,
                    Err(_) => panic!("hook name"),
                },
                addr: $m::$f as *const (),
                real: 0,
            },
        )*)*]
    };
}

/// Every interposed function, for binding without `LD_PRELOAD` ([`crate::bind`]). This is the
/// one list: a new `#[no_mangle]` hook goes here too (`tests/bind.rs` compares this list with
/// the library's exported functions).
#[cfg(not(test))]
pub static HOOKS: &[HookEntry] = hook_list![
    posix::{
        __open64_2, __open_2, __openat64_2, __openat_2, __pread64_chk, __pread_chk, __read_chk,
        access, close, close_range, closefrom, creat, creat64, dup, dup2, dup3, faccessat,
        fcntl, fcntl64, fdatasync, fsync, ftruncate, ftruncate64, lseek, lseek64, mkdir,
        mkdirat, mmap, mmap64, open, open64, openat, openat64, pread, pread64, preadv, preadv64,
        pwrite, pwrite64, pwritev, pwritev64, read, readv, rename, renameat, rmdir, unlink,
        unlinkat, write, writev,
    },
    stat::{
        __fxstat, __fxstat64, __fxstatat, __fxstatat64, __lxstat, __lxstat64, __xstat,
        __xstat64, fstat, fstat64, fstatat, fstatat64, lstat, lstat64, stat, stat64, statx,
    },
    stdio::{
        __fgets_chk, __fread_chk, fclose, fdopen, fflush, fgets, fopen, fopen64, fputs, fread,
        freopen, freopen64, fseek, fseeko, fseeko64, ftell, ftello, ftello64, fwrite,
    },
    stdio_chars::{
        _IO_getc, _IO_putc, __getdelim, __isoc99_vfscanf, __vfprintf_chk, clearerr,
        clearerr_unlocked, feof, feof_unlocked, ferror, ferror_unlocked, fflush_unlocked, fgetc,
        fgetc_unlocked, fgetpos, fgetpos64, fgets_unlocked, fileno, fputc, fputc_unlocked,
        fputs_unlocked, fread_unlocked, fsetpos, fsetpos64, fwrite_unlocked,
        getc, getc_unlocked, getdelim, getline, getw, putc, putc_unlocked, putw,
        rewind, setvbuf, ungetc, vfprintf, vfscanf,
        #[cfg(target_arch = "x86_64")] fprintf,
        #[cfg(target_arch = "x86_64")] __fprintf_chk,
        #[cfg(target_arch = "x86_64")] fscanf,
        #[cfg(target_arch = "x86_64")] __isoc99_fscanf,
    },
    chdir::{
        chdir, fchdir, fts_open, fts64_open, fts_close, fts64_close, nftw, nftw64,
    },
    links_attrs::{
        __readlink_chk, __readlinkat_chk, __realpath_chk, chmod, chown, fchmod,
        fchmodat, fchown, fchownat, fstatvfs, fstatvfs64, futimens, futimes, lchown, link,
        linkat, lutimes, mkfifo, mkfifoat, mknod, mknodat, readlink, readlinkat, realpath,
        remove, statvfs, statvfs64, symlink, symlinkat, truncate, truncate64, utime,
        utimensat, utimes,
    },
    fdctl::{
        fallocate, fallocate64, flock, ioctl, isatty, posix_fadvise, posix_fadvise64,
        posix_fallocate, posix_fallocate64,
    },
    copies::{
        copy_file_range, sendfile, sendfile64, splice,
    },
    maps::{
        msync, munmap,
    },
    dirs::{
        closedir, dirfd, fdopendir, opendir, readdir, readdir64,
    },
    aio::{
        aio_error, aio_error64, aio_read, aio_read64, aio_return, aio_return64, aio_suspend,
        aio_suspend64, aio_write, aio_write64, lio_listio, lio_listio64,
    },
    process::{
        _Exit, _exit, execv, execve, execvp, execvpe, fork, kill, pclose, popen, posix_spawn,
        posix_spawnp, pthread_kill, raise, sigqueue, system, tgkill, umask, wait, wait4, waitpid,
        #[cfg(target_arch = "x86_64")] vfork,
        #[cfg(target_arch = "x86_64")] execl,
        #[cfg(target_arch = "x86_64")] execlp,
        #[cfg(target_arch = "x86_64")] execle,
    },
    signals::{
        __sigaction, __sysv_signal, bsd_signal, sigaction, siginterrupt, signal, sigset,
        ssignal, sysv_signal,
    },
];

pub const POSIX: &[u8] = b"POSIX";
pub const STDIO: &[u8] = b"STDIO";

/// The traced file behind `fd`, when POSIX tracing is on.
#[inline(always)]
pub fn traced_fd(fd: c_int) -> Option<Interned> {
    if posix_on() {
        FDS.path(fd)
    } else {
        None
    }
}

/// The fd table's word of `fd` for [`on_fd!`](crate::on_fd): traced when it names a file (only fds of
/// POSIX tracing are entered in the table, so no mode check: whether tracing is still on is
/// checked on the traced path).
#[inline(always)]
pub fn traced_fd_entry(fd: c_int) -> crate::table::Entry {
    FDS.word(fd)
}

/// The traced file behind stream `fp` and its fd, when stdio tracing is on.
#[inline(always)]
pub fn traced_file(fp: *mut libc::FILE) -> Option<(Interned, c_int)> {
    if fp.is_null() || !FILES.any_open() || !stdio_on() {
        return None;
    }
    // SAFETY: the program passed `fp` to a stdio function, so it is a live stream; fileno
    // only reads its descriptor (glibc: no lock, no side effect).
    let fd = unsafe { fileno_unlocked(fp) };
    FILES.path(fd, fp as usize).map(|i| (i, fd))
}

extern "C" {
    /// glibc's `fileno` without the interposition: this library exports its own `fileno`
    /// (a traced call), so the tables use the unlocked variant, which nothing here interposes.
    pub fn fileno_unlocked(fp: *mut libc::FILE) -> c_int;
}

/// Process-control calls (`fork`, `vfork`, `wait*`, `posix_spawn*`, `system`, `popen`,
/// `pclose`) are recorded whenever POSIX calls are traced, as the reference records them: also
/// in a process that touches no data dir (a launcher that forks and waits then has a file).
#[inline]
pub fn process_events_on() -> bool {
    posix_on()
}

/// `umask` names no file: recorded when every file is traced, or once this process has traced
/// a file (a process that never touches a data dir leaves no file for it).
#[inline]
pub fn attr_events_on() -> bool {
    posix_on()
        && (crate::table::touched() || filter() == Some(&dftracer_core::frontend::DataDirs::All))
}

/// Bytes of the C string `p` (`None` for NULL).
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
#[inline]
pub unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated per the caller's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// Resolves `path` (relative to `dirfd`, or the cwd for `AT_FDCWD`) into `buf`: its absolute,
/// normalised form when it is traced, else `None`.
///
/// # Safety
/// `path` must be NULL or a valid C string.
pub unsafe fn traced_path(
    dirfd: c_int,
    path: *const c_char,
    buf: &mut [u8; PATH_MAX],
) -> Option<&[u8]> {
    let filter = filter()?;
    // SAFETY: forwarded contract.
    let p = unsafe { resolve_path(dirfd, path, buf) }?;
    filter.traces(p).then_some(p)
}

/// The absolute, normalised form of `path` (relative to `dirfd`), whatever the filter says.
///
/// # Safety
/// `path` must be NULL or a valid C string.
pub unsafe fn resolve_path(
    dirfd: c_int,
    path: *const c_char,
    buf: &mut [u8; PATH_MAX],
) -> Option<&[u8]> {
    // SAFETY: forwarded contract.
    let p = unsafe { c_bytes(path) }?;
    resolve_bytes(dirfd, p, buf)
}

/// [`resolve_path`] of the path's bytes `p`.
#[inline]
pub fn resolve_bytes<'b>(dirfd: c_int, p: &[u8], buf: &'b mut [u8; PATH_MAX]) -> Option<&'b [u8]> {
    let base = if p.first() == Some(&b'/') {
        buf[0] = b'/';
        1
    } else if dirfd == libc::AT_FDCWD {
        cwd::cwd_into(buf)?
    } else {
        fd_path_into(dirfd, buf)?
    };
    let n = dftracer_core::frontend::append_normalized(buf, base, p)?;
    Some(&buf[..n])
}

/// The path of the directory open as `fd`: from the fd table when traced, else from
/// `/proc/self/fd/<fd>`.
fn fd_path_into(fd: c_int, buf: &mut [u8; PATH_MAX]) -> Option<usize> {
    if let Some(p) = FDS.path(fd).and_then(|i| i.file.pin()) {
        let n = p.path().len();
        if n >= buf.len() {
            return None;
        }
        buf[..n].copy_from_slice(p.path());
        return Some(n);
    }
    if fd < 0 {
        return None;
    }
    let mut link = [0u8; 32];
    let prefix = b"/proc/self/fd/";
    link[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let mut v = fd as u32;
    let mut nd = 0;
    loop {
        digits[nd] = b'0' + (v % 10) as u8;
        nd += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for k in 0..nd {
        link[prefix.len() + k] = digits[nd - 1 - k];
    }
    // SAFETY: `link` is NUL-terminated (zeroed tail); buf is writable for its length.
    let n = unsafe {
        libc::readlink(
            link.as_ptr() as *const c_char,
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
        )
    };
    if n <= 0 || n as usize >= buf.len() || buf[0] != b'/' {
        return None;
    }
    Some(n as usize)
}

/// The call to make when a real symbol is missing: fail with `ENOSYS`.
#[cold]
pub fn missing<T>(v: T) -> T {
    crate::real::set_errno(libc::ENOSYS);
    v
}

/// An fd-based POSIX call: traced when `fd` is a traced fd.
///
/// `on_fd!("name", fd, call_expr, |ret| [key: I(expr), key: U(expr), ...])` records `fd`,
/// the extra args (`I`: signed, `U`: unsigned) and `fhash`, as a static-schema event (a
/// pointer and a few integers in the ring). `call_expr` appears once per branch and is
/// evaluated exactly once.
///
/// `on_fd!(fold "name", ...)`: a call that says nothing about the file's I/O (`isatty`,
/// `fstat` of the fd; it must have an `I` `ret`): when it returns 0 the writer counts it in a
/// ph 3 record instead of writing it ([`dftracer_core::Schema::folded`]).
#[macro_export]
macro_rules! on_fd {
    (fold $name:expr, $fd:expr, $call:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {
        $crate::on_fd!(@mode folded, $name, $fd, $call, |$ret| [$($key: $kind($val)),*])
    };
    ($name:expr, $fd:expr, $call:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {
        $crate::on_fd!(@mode plain, $name, $fd, $call, |$ret| [$($key: $kind($val)),*])
    };
    (@mode $mode:ident, $name:expr, $fd:expr, $call:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {{
        let fd: ::libc::c_int = $fd;
        match $crate::hooks::traced_fd_entry(fd) {
            e if !e.is_traced() => $call,
            // Out of line, so that the untraced path above stays a leaf that tail-jumps.
            e => $crate::hooks::out_of_line(move || {
                $crate::on_fd!(@traced_as $mode, $name, fd, e, $call, |$ret| [$($key: $kind($val)),*])
            }),
        }
    }};
    // The traced path alone (`@traced_as plain|folded, ...`), for `entry`, the fd table's
    // word of `fd` (a traced fd: see `traced_fd_entry`): `fd_shim!`'s traced function.
    (@schema plain, $s:expr) => { $s };
    (@schema folded, $s:expr) => { $s.folded() };
    (@traced_as $mode:ident, $name:expr, $fd:expr, $entry:expr, $call:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {{
        let (fd, entry): (::libc::c_int, $crate::table::Entry) = ($fd, $entry);
        // The clock first, while the call's arguments are all the state there is: fewer
        // values live across a clock that is a call (`clock_gettime` without a TSC).
        let t0 = $crate::ticks();
        {
            // Whether tracing is still on (it may have ended with the fd in the table) is
            // the record's own check, after the call.
            match $crate::enter() {
                None => $call,
                Some(busy) => {
                    static SCHEMA: ::dftracer_core::Schema = $crate::on_fd!(@schema $mode, ::dftracer_core::Schema::new(
                        ::dftracer_core::Layer::LibcIo,
                        $name,
                        "POSIX",
                        &[("fd", ::dftracer_core::Slot::Int), $((stringify!($key), $crate::slot!($kind)),)*],
                        "fhash",
                    ));
                    let $ret = $call;
                    let t1 = $crate::ticks_after(t0);
                    // No `SavedErrno`: the clock and a static record leave `errno` alone
                    // (see `Busy::record_static`).
                    $crate::guarded(|| {
                        busy.record_static(
                            &SCHEMA,
                            t0,
                            t1,
                            [fd as i64 as u64, $($crate::slot_val!($kind, $val),)*],
                            &entry.file().file,
                        )
                    });
                    drop(busy);
                    $ret
                }
            }
        }
    }};
}

/// A whole fd shim: `fd_shim!([fold] fn sym(args...) -> R, fd, missing, "name", |ret| [...])`
/// defines the exported `sym`, which forwards to the next `sym` and records, when `fd` (one
/// of `args`) is traced, as [`on_fd!`](crate::on_fd) would (`fold`: its `fold` form;
/// `missing`: what `sym` returns when the real symbol is absent, with `ENOSYS`).
///
/// The shim is a leaf that tail-calls: its first call's symbol look-up and its traced path
/// are functions of their own, called with the shim's own arguments in registers (and the
/// fd table's word in the next one), so an untraced call is the table look-up and a jump,
/// without a stack frame; [`on_fd!`](crate::on_fd) inside a shim of its own keeps a frame
/// for its untraced path and hands its traced path the values through memory. At most five
/// arguments (the traced path takes one more, in registers).
#[macro_export]
macro_rules! fd_shim {
    (fold fn $sym:ident($($arg:ident: $ty:ty),* $(,)?) -> $r:ty, $fd:ident, $missing:expr, $name:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {
        $crate::fd_shim!(@mode folded, $sym, ($($arg: $ty),*), $r, $fd, $missing, $name, |$ret| [$($key: $kind($val)),*]);
    };
    (fn $sym:ident($($arg:ident: $ty:ty),* $(,)?) -> $r:ty, $fd:ident, $missing:expr, $name:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {
        $crate::fd_shim!(@mode plain, $sym, ($($arg: $ty),*), $r, $fd, $missing, $name, |$ret| [$($key: $kind($val)),*]);
    };
    (@mode $mode:ident, $sym:ident, ($($arg:ident: $ty:ty),*), $r:ty, $fd:ident, $missing:expr, $name:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),*]) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> $r {
            type F = unsafe extern "C" fn($($ty),*) -> $r;
            static ADDR: ::std::sync::atomic::AtomicUsize = ::std::sync::atomic::AtomicUsize::new(0);
            // `extern "C"`, as the shim: the shim's calls to these two are then tail calls.
            #[cold]
            #[inline(never)]
            unsafe extern "C" fn first($($arg: $ty),*) -> $r {
                // SAFETY: the literal ends with exactly one NUL.
                let name = unsafe { ::std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($sym), "\0").as_bytes()) };
                match $crate::real::cached(&ADDR, name) {
                    0 => $crate::hooks::missing($missing),
                    // SAFETY: the program's own call. Not through the exported `$sym`: bound
                    // in process (not preloaded), the library's own call to it would bind to
                    // libc's.
                    p => unsafe { go(p, $($arg),*) },
                }
            }
            #[inline(always)]
            unsafe fn go(p: usize, $($arg: $ty),*) -> $r {
                match $crate::hooks::traced_fd_entry($fd) {
                    e if !e.is_traced() => {
                        // SAFETY: `p` is the address of the C function of this name, whose
                        // signature is `F`.
                        unsafe { ::std::mem::transmute::<usize, F>(p)($($arg),*) }
                    }
                    e => unsafe { traced($($arg,)* e) },
                }
            }
            // The values in the shim's own registers, the fd's entry in the next: a tail call.
            #[inline(never)]
            unsafe extern "C" fn traced($($arg: $ty,)* entry: $crate::table::Entry) -> $r {
                // Loaded where it is called, not kept in a register across the clock read.
                // SAFETY: set (non-zero) before the shim called this; as below.
                let real = || unsafe { ::std::mem::transmute::<usize, F>(ADDR.load(::std::sync::atomic::Ordering::Relaxed)) };
                $crate::on_fd!(@traced_as $mode, $name, $fd, entry, real()($($arg),*), |$ret| [$($key: $kind($val)),*])
            }
            let p = ADDR.load(::std::sync::atomic::Ordering::Relaxed);
            if p == 0 {
                return first($($arg),*);
            }
            // SAFETY: the program's own call; `p` is resolved.
            unsafe { go(p, $($arg),*) }
        }
    };
}

/// A process call (it names no file): recorded under [`process_events_on`] (`umask`: with
/// `skip_if !attr_events_on()`).
///
/// `on_process!([skip_if cond;] call_expr, |ret, t0, t1| record_expr)`, the tail of a shim:
/// forwards `call_expr` at once when `cond` holds, process events are off or this thread is
/// already recording; otherwise times it, saves `errno`, evaluates `record_expr` (which
/// records inside [`guarded`](crate::guarded)) and returns the call's result. `call_expr` is
/// evaluated exactly once.
#[macro_export]
macro_rules! on_process {
    ($call:expr, |$ret:ident, $t0:ident, $t1:ident| $record:expr) => {
        $crate::on_process!(skip_if false; $call, |$ret, $t0, $t1| $record)
    };
    (skip_if $skip:expr; $call:expr, |$ret:ident, $t0:ident, $t1:ident| $record:expr) => {{
        if $skip || !$crate::hooks::process_events_on() {
            return $call;
        }
        let Some(busy) = $crate::enter() else {
            return $call;
        };
        let $t0 = $crate::ticks();
        let $ret = $call;
        let _errno = $crate::SavedErrno::new();
        let $t1 = $crate::ticks_after($t0);
        $record;
        drop(busy);
        $ret
    }};
}

/// Runs `f` in a separate frame: keeps a shim's traced path out of its untraced fast path.
#[inline(never)]
pub fn out_of_line<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The [`dftracer_core::Slot`] of an `I`/`U` arg in [`on_fd!`]/`on_file!`.
#[macro_export]
macro_rules! slot {
    (I) => {
        ::dftracer_core::Slot::Int
    };
    (U) => {
        ::dftracer_core::Slot::UInt
    };
}

/// The `u64` bits of an `I`/`U` arg value.
#[macro_export]
macro_rules! slot_val {
    (I, $v:expr) => {
        ($v) as i64 as u64
    };
    (U, $v:expr) => {
        ($v) as u64
    };
}

/// Resolves `path` against `dirfd` before the real call (lexically: no file-system access
/// except `getcwd`/`readlink` for relative paths) and returns its length in `buf` when the
/// file is traced. `errno` is left as it was, so a successful real call after this sees the
/// program's own value. Untraced paths therefore cost no clock reads.
///
/// # Safety
/// `path` must be NULL or a valid C string.
#[inline]
pub unsafe fn pre_resolve(
    dirfd: c_int,
    path: *const c_char,
    buf: &mut [u8; PATH_MAX],
) -> Option<usize> {
    let _errno = crate::SavedErrno::new();
    // SAFETY: forwarded contract.
    crate::guarded_or(None, || {
        unsafe { traced_path(dirfd, path, buf) }.map(|p| p.len())
    })
}

/// Where [`pre_resolve_kept`] left a traced path: the thread's last resolution
/// ([`resolved::Last::kept_path`], `kept`; its slot: [`resolved::Last::file`]) or the buffer;
/// its length; `entry`: the kept entry is this path's (the caller may give it the slot it
/// interns, [`resolved::Last::set_file`]). Two words: returned in registers.
pub struct Resolution {
    pub len: usize,
    pub kept: bool,
    pub entry: bool,
}

/// [`pre_resolve`] through the thread's last resolution (`last`, see [`resolved`]): the same
/// answer, without the work when `path` is the one kept and nothing it depended on changed.
/// A path that comes twice in a row is kept for the next call.
///
/// # Safety
/// `path` must be NULL or a valid C string.
#[inline]
pub unsafe fn pre_resolve_kept(
    dirfd: c_int,
    path: *const c_char,
    buf: &mut [u8; PATH_MAX],
    last: &mut resolved::Last,
) -> Option<Resolution> {
    let _errno = crate::SavedErrno::new();
    crate::guarded_or(None, || {
        let filter = filter()?;
        // SAFETY: forwarded contract.
        let p = unsafe { c_bytes(path) }?;
        // Relative to a directory fd: never kept, never looked up.
        let keepable = p.first() == Some(&b'/') || dirfd == libc::AT_FDCWD;
        let id = filter as *const dftracer_core::frontend::DataDirs as usize;
        let mut repeat = false;
        if keepable {
            match last.lookup(p, id) {
                resolved::Found::Untraced => return None,
                resolved::Found::Traced(n) => {
                    return Some(Resolution {
                        kept: true,
                        len: n,
                        entry: true,
                    })
                }
                resolved::Found::Miss => repeat = last.noted_again(p),
            }
        }
        if repeat {
            return keep_resolved(dirfd, p, buf, last, filter, id);
        }
        let q = resolve_bytes(dirfd, p, buf)?;
        filter.traces(q).then_some(Resolution {
            kept: false,
            len: q.len(),
            entry: false,
        })
    })
}

/// A keepable path's second miss in a row: resolves it and keeps the answer (for a relative
/// path, only when the cwd text it was resolved against is known, [`cwd::stamp_now`]).
#[inline(never)]
fn keep_resolved(
    dirfd: c_int,
    p: &[u8],
    buf: &mut [u8; PATH_MAX],
    last: &mut resolved::Last,
    filter: &dftracer_core::frontend::DataDirs,
    id: usize,
) -> Option<Resolution> {
    let relative = p.first() != Some(&b'/');
    let stamp = if relative { cwd::stamp_now() } else { None };
    let Some(q) = resolve_bytes(dirfd, p, buf) else {
        last.clear();
        return None;
    };
    let traced = filter.traces(q).then_some(q);
    let entry = if relative && !stamp.is_some_and(cwd::still) {
        // The cwd moved, or was read from the kernel: its text has no stamp to keep.
        last.clear();
        false
    } else {
        last.keep(p, id, stamp, traced)
    };
    traced.map(|q| Resolution {
        kept: false,
        len: q.len(),
        entry,
    })
}

/// A path-based POSIX call: recorded when the path (resolved against `dirfd`) is traced.
#[macro_export]
macro_rules! on_path {
    ($name:expr, $dirfd:expr, $path:expr, $call:expr, |$ret:ident| [$($arg:expr),* $(,)?]) => {{
        let (dirfd, path): (::libc::c_int, *const ::libc::c_char) = ($dirfd, $path);
        match if $crate::posix_on() { $crate::enter() } else { None } {
            None => $call,
            Some(mut busy) => {
                let resolved = match busy.scratch() {
                    // SAFETY: the program passed this path to a libc call taking a C string.
                    Some(bufs) => unsafe { $crate::hooks::pre_resolve(dirfd, path, &mut bufs[0]) }
                        .map(|n| (bufs, n)),
                    None => None,
                };
                match resolved {
                    None => {
                        drop(busy);
                        $call
                    }
                    Some((bufs, n)) => {
                        $crate::table::touch();
                        let t0 = $crate::ticks();
                        let $ret = $call;
                        let _errno = $crate::SavedErrno::new();
                        let t1 = $crate::ticks_after(t0);
                        let p = &bufs[0][..n];
                        $crate::guarded(|| {
                            $crate::record(
                                $crate::hooks::POSIX,
                                $name,
                                t0,
                                t1,
                                &[$($arg,)* ::dftracer_core::Arg::new("fhash", ::dftracer_core::Value::Path(p))],
                            )
                        });
                        drop(busy);
                        $ret
                    }
                }
            }
        }
    }};
}

/// A `FILE*`-based stdio call: traced when the stream came from a traced `fopen`/`fdopen`.
/// Same arg syntax as [`on_fd!`].
#[macro_export]
macro_rules! on_file {
    ($name:expr, $fp:expr, $call:expr, |$ret:ident| [$($key:ident : $kind:ident($val:expr)),* $(,)?]) => {{
        match $crate::hooks::traced_file($fp) {
            None => $call,
            Some((file, _fd)) => $crate::hooks::out_of_line(move || match $crate::enter() {
                None => $call,
                Some(busy) => {
                    static SCHEMA: ::dftracer_core::Schema = ::dftracer_core::Schema::new(
                        ::dftracer_core::Layer::LibcIo,
                        $name,
                        "STDIO",
                        &[$((stringify!($key), $crate::slot!($kind)),)*],
                        "fhash",
                    );
                    let t0 = $crate::ticks();
                    let $ret = $call;
                    let _errno = $crate::SavedErrno::new();
                    let t1 = $crate::ticks_after(t0);
                    $crate::guarded(|| {
                        busy.record_static(
                            &SCHEMA,
                            t0,
                            t1,
                            [$($crate::slot_val!($kind, $val),)*],
                            &file.file,
                        )
                    });
                    drop(busy);
                    $ret
                }
            }),
        }
    }};
}
