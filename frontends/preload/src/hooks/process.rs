//! Process calls: the `exec` family flushes the trace before the image is replaced (the new
//! program, which inherits `LD_PRELOAD` and the `DFTRACER_*` environment, writes its own file),
//! and `_exit`/`_Exit` finalize the trace (`exit` is covered by the core's `atexit`). `fork`
//! is not interposed: the core's `pthread_atfork` handler gives the child its own file.
//!
//! `argv` is never copied or rewritten for `execv*`: the program's own array is passed on.
//! For `execl`, `execlp` and `execle` (C-variadic, which stable Rust cannot define) a naked
//! x86_64 trampoline stores the six integer argument registers next to the caller's stack
//! arguments and calls [`exec_variadic`], which reads argument *i* from the register area for
//! i < 6 and from the caller's stack after that (exactly how the SysV ABI passes variadic
//! pointer arguments), stopping at the terminating NULL; `execle`'s `envp` is the argument
//! after it. On other architectures these three are not interposed (they still work, they
//! just do not flush first).
//!
//! A `vfork` child shares the parent's memory and runs no atfork handler: it is recognised by
//! its pid and never flushes or finalizes the parent's tracer.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int};

use dftracer_core::{Arg, Value};

use super::{c_bytes, missing, POSIX};
use crate::{busy_here, enter, guarded, now, owner_pid, posix_on, real, record, SavedErrno};

/// Records the exec and finishes the trace (its `end` record last), so that nothing is lost
/// when the image is replaced. An exec that fails leaves the process untraced from then on
/// (said once on stderr): the file already ended.
unsafe fn before_exec(name: &'static [u8], path: *const c_char, argv: *const *const c_char) {
    if real::getpid() != owner_pid() || !dftracer_core::is_running() {
        return;
    }
    let Some(busy) = enter() else { return };
    let _errno = SavedErrno::new();
    guarded(|| {
        if posix_on() {
            record_exec(name, path, argv);
        }
        dftracer_core::finalize();
        EXEC_FINALIZED.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    drop(busy);
}

/// The trace was finished by an exec.
static EXEC_FINALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// After an exec returned (it failed): say once that tracing ended with it.
fn after_failed_exec() {
    if EXEC_FINALIZED.swap(false, std::sync::atomic::Ordering::Relaxed)
        && real::getpid() == owner_pid()
    {
        let _errno = SavedErrno::new();
        dftracer_core::eprint_line(&format!(
            "[DFTRACER WARN] an exec failed in pid {} after its trace was finished; later calls of this process are not traced",
            real::getpid()
        ));
    }
}

unsafe fn record_exec(name: &'static [u8], path: *const c_char, argv: *const *const c_char) {
    {
        // Recorded under the same DATA_DIR rule as every other path: a program under a data
        // dir, or any program when every file is traced (a PATH-searched bare name counts as
        // traced only then). Otherwise every shell in a pipeline would leave a file.
        let mut buf = [0u8; super::PATH_MAX];
        let name_bytes = c_bytes(path).unwrap_or(b"");
        let traced = if name_bytes.contains(&b'/') {
            super::traced_path(libc::AT_FDCWD, path, &mut buf).is_some()
        } else {
            crate::filter() == Some(&dftracer_core::filter::DataDirs::All)
        };
        if !traced {
            return;
        }
        let mut argc = 0i64;
        if !argv.is_null() {
            while !(*argv.add(argc as usize)).is_null() {
                argc += 1;
            }
        }
        let t = now();
        record(
            POSIX,
            name,
            t,
            t,
            &[
                Arg::int("argc", argc),
                Arg::new("fhash", Value::Path(c_bytes(path).unwrap_or(b""))),
            ],
        );
    }
}

type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;

unsafe fn do_execve(
    name: &'static [u8],
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let Some(real) = real!(execve: ExecveFn) else {
        return missing(-1);
    };
    before_exec(name, path, argv);
    let r = real(path, argv, envp);
    after_failed_exec();
    r
}

unsafe fn do_execv(name: &'static [u8], path: *const c_char, argv: *const *const c_char) -> c_int {
    let Some(real) = real!(execv: ExecvFn) else {
        return missing(-1);
    };
    before_exec(name, path, argv);
    let r = real(path, argv);
    after_failed_exec();
    r
}

unsafe fn do_execvp(name: &'static [u8], file: *const c_char, argv: *const *const c_char) -> c_int {
    let Some(real) = real!(execvp: ExecvFn) else {
        return missing(-1);
    };
    before_exec(name, file, argv);
    let r = real(file, argv);
    after_failed_exec();
    r
}

#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    do_execve(b"execve", path, argv, envp)
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    do_execv(b"execv", path, argv)
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    do_execvp(b"execvp", file, argv)
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let Some(real) = real!(execvpe: ExecveFn) else {
        return missing(-1);
    };
    before_exec(b"execvpe", file, argv);
    let r = real(file, argv, envp);
    after_failed_exec();
    r
}

const KIND_EXECL: usize = 0;
const KIND_EXECLP: usize = 1;
const KIND_EXECLE: usize = 2;
/// argv entries kept on the stack; longer lists spill to the heap.
const SMALL_ARGV: usize = 256;

/// Rebuilds `argv` from a variadic call's argument areas and execs. `regs` holds the six
/// integer argument registers in order (rdi, rsi, rdx, rcx, r8, r9); `stack` points at the
/// caller's first stack argument.
///
/// # Safety
/// Called only by the trampolines below, with the areas of a call
/// `execl*(path, arg0, ..., NULL[, envp])` made by the program.
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn exec_variadic(regs: *const usize, stack: *const usize, kind: usize) -> c_int {
    // SAFETY: the caller passed a NULL-terminated list: we read up to (and for execle one past)
    // the NULL, which the C caller placed in registers or on its stack.
    let arg = |i: usize| -> usize {
        if i < 6 {
            *regs.add(i)
        } else {
            *stack.add(i - 6)
        }
    };
    let path = arg(0) as *const c_char;
    let mut small: [*const c_char; SMALL_ARGV] = [std::ptr::null(); SMALL_ARGV];
    let mut big: Vec<*const c_char> = Vec::new();
    let mut n = 0usize;
    loop {
        let a = arg(1 + n) as *const c_char;
        if n < SMALL_ARGV {
            small[n] = a;
        } else {
            if big.is_empty() {
                big.extend_from_slice(&small);
            }
            big.push(a);
        }
        n += 1;
        if a.is_null() {
            break;
        }
    }
    let argv = if big.is_empty() {
        small.as_ptr()
    } else {
        big.as_ptr()
    };
    match kind {
        KIND_EXECL => do_execv(b"execl", path, argv),
        KIND_EXECLP => do_execvp(b"execlp", path, argv),
        _ => {
            let envp = arg(1 + n) as *const *const c_char;
            do_execve(b"execle", path, argv, envp)
        }
    }
}

#[cfg(target_arch = "x86_64")]
macro_rules! variadic_exec {
    ($sym:ident, $kind:expr) => {
        /// C-variadic entry point: see the module docs.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $sym(path: *const c_char, arg0: *const c_char) -> c_int {
            core::arch::naked_asm!(
                // On entry rsp = 8 mod 16; 56 bytes keep the call below 16-byte aligned.
                "sub rsp, 56",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                "mov rdi, rsp",
                // The caller's first stack argument: above our 56 bytes and the return address.
                "lea rsi, [rsp + 64]",
                "mov edx, {kind}",
                "call {imp}",
                "add rsp, 56",
                "ret",
                kind = const $kind,
                imp = sym exec_variadic,
            )
        }
    };
}

#[cfg(target_arch = "x86_64")]
variadic_exec!(execl, KIND_EXECL);
#[cfg(target_arch = "x86_64")]
variadic_exec!(execlp, KIND_EXECLP);
#[cfg(target_arch = "x86_64")]
variadic_exec!(execle, KIND_EXECLE);

/// Finalizes the trace before the process ends without running `atexit` handlers.
fn before_exit() {
    // Not in a vfork child (the parent's tracer), not from a signal handler that interrupted
    // a hook on this thread (the tracer's locks may be held here: finalizing could hang).
    if dftracer_core::is_running()
        && real::getpid() == owner_pid()
        && !busy_here()
        && !dftracer_core::is_internal()
    {
        guarded(dftracer_core::finalize);
    }
}

type ExitFn = unsafe extern "C" fn(c_int) -> !;

#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    before_exit();
    if let Some(real) = real!(_exit: ExitFn) {
        real(status)
    }
    libc::syscall(libc::SYS_exit_group, status as libc::c_long);
    unreachable_exit()
}

#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    before_exit();
    if let Some(real) = real!(_Exit: ExitFn) {
        real(status)
    }
    libc::syscall(libc::SYS_exit_group, status as libc::c_long);
    unreachable_exit()
}

fn unreachable_exit() -> ! {
    loop {
        std::hint::spin_loop();
    }
}
