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
//! `kill`, `raise`, `tgkill`, `pthread_kill` and `sigqueue` finish the trace first only for a
//! `SIGKILL` aimed at the process itself (no handler sees it). Any other signal is left to its
//! delivery: where its disposition is the default the core's handler stands in for `SIG_DFL`
//! and finishes the trace then (`hooks/signals.rs`), and a blocked signal the program takes
//! with `sigwait`, `sigtimedwait` or `signalfd` ends nothing.
//!
//! `popen`/`pclose` and `umask` are process calls too (the stream is a pipe to a shell child;
//! `umask` changes a process attribute, not a file): recorded under the process-call rule.
//!
//! A `vfork` child shares the parent's memory and runs no atfork handler: it is recognised by
//! its pid and never flushes or finalizes the parent's tracer.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, mode_t, FILE};

use dftracer_core::{Arg, Value};

use super::{c_bytes, fileno_unlocked, missing, process_events_on, POSIX};
use crate::{busy_here, enter, guarded, on_process, owner_pid, posix_on, real, record, ticks, SavedErrno};

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
        dftracer_core::frontend::eprint_line(&format!(
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
            crate::filter() == Some(&dftracer_core::frontend::DataDirs::All)
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
        let t = ticks();
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

/// Execs through the real `$sym` (`$fn`) with `($args)`: the trace is finished first
/// ([`before_exec`], event `$name`); the call returns only when the exec failed.
macro_rules! exec_via {
    ($sym:ident: $fn:ty, $name:expr, $path:expr, $argv:expr, ($($arg:expr),*)) => {{
        let Some(real) = real!($sym: $fn) else {
            return missing(-1);
        };
        before_exec($name, $path, $argv);
        let r = real($($arg),*);
        after_failed_exec();
        r
    }};
}

unsafe fn do_execve(
    name: &'static [u8],
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    exec_via!(execve: ExecveFn, name, path, argv, (path, argv, envp))
}

unsafe fn do_execv(name: &'static [u8], path: *const c_char, argv: *const *const c_char) -> c_int {
    exec_via!(execv: ExecvFn, name, path, argv, (path, argv))
}

unsafe fn do_execvp(name: &'static [u8], file: *const c_char, argv: *const *const c_char) -> c_int {
    exec_via!(execvp: ExecvFn, name, file, argv, (file, argv))
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
    exec_via!(execvpe: ExecveFn, b"execvpe", file, argv, (file, argv, envp))
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
        && !dftracer_core::frontend::is_internal()
    {
        guarded(dftracer_core::finalize);
    }
}

type ExitFn = unsafe extern "C" fn(c_int) -> !;

macro_rules! exit_hook {
    ($($sym:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(status: c_int) -> ! {
            before_exit();
            if let Some(real) = real!($sym: ExitFn) {
                real(status)
            }
            libc::syscall(libc::SYS_exit_group, status as libc::c_long);
            unreachable_exit()
        }
    )*};
}

exit_hook!(_exit, _Exit);

fn unreachable_exit() -> ! {
    loop {
        std::hint::spin_loop();
    }
}

// ---------------------------------------------------------------- fork, wait, spawn, system
//
// Process calls name no file: they are recorded under `hooks::process_events_on` (whenever
// POSIX calls are traced, as the reference does), with `dur` 0 and their length in
// `args.call_dur` (`record_process`). Children trace themselves: a `fork` child through the core's
// atfork handler (`-fork` file), a spawned or `system` child because it inherits `LD_PRELOAD`
// and the `DFTRACER_*` environment. The parent's event carries the child's pid (`ret` for
// `fork`/`vfork`, `pid` for `posix_spawn`); a child's header records its `ppid`.

/// Records a process-control call (no file): `cat` POSIX and its name, as the reference
/// (dfanalyzer's DLIO presets find DataLoader forks by `cat == "posix" & func_name ==
/// "fork"`; dftracer-utils builds the process tree from `fork`'s `ret`), at the call's start
/// with `dur` 0 and the call's real length in `args.call_dur` (trace unit): both tools sum
/// the `dur` of every POSIX event as I/O time, and a fork of a large process or a wait for a
/// child is not I/O. `dftracer perfetto` draws the call over its real length. FORMAT.md
/// "Process calls".
/// `t0` and `t1` are [`ticks`] readings.
fn record_process(name: &'static [u8], t0: u64, t1: u64, args: &[Arg]) {
    const MAX: usize = 7;
    let mut all = [Arg::int("call_dur", 0); MAX + 1];
    // With metadata off only `call_dur` stays: the timeline needs it.
    let n = if crate::metadata_on() { args.len().min(MAX) } else { 0 };
    all[..n].copy_from_slice(&args[..n]);
    let (ts, dur) = crate::ticks_span(t0, t1);
    all[n] = Arg::int("call_dur", dur as i64);
    guarded(|| {
        dftracer_core::complete(
            dftracer_core::Layer::LibcIo,
            name,
            POSIX,
            ts,
            0,
            &all[..=n],
        )
    });
}

/// `fork`: the parent records `ret` = the child's pid; the child records nothing here.
#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let Some(real) = real!(fork: unsafe extern "C" fn() -> libc::pid_t) else {
        return missing(-1);
    };
    if !process_events_on() {
        return real();
    }
    let Some(busy) = enter() else { return real() };
    let t0 = ticks();
    let pid = real();
    if pid == 0 {
        // The child: its own tracer state was set up by the atfork handler.
        drop(busy);
        return 0;
    }
    let _errno = SavedErrno::new();
    let t1 = crate::ticks_after(t0);
    record_process(b"fork", t0, t1, &[Arg::int("ret", pid as i64)]);
    drop(busy);
    pid
}

/// Called by the `vfork` trampoline before the syscall: the start time, 0 when untraced.
#[cfg(target_arch = "x86_64")]
extern "C" fn vfork_before() -> u64 {
    if !process_events_on() || busy_here() || dftracer_core::frontend::is_internal() {
        return 0;
    }
    ticks().max(1)
}

/// Called by the `vfork` trampoline in the parent once the child has exec'd or exited
/// (or on failure): sets `errno` for a failed call and records the event.
#[cfg(target_arch = "x86_64")]
extern "C" fn vfork_after(raw: i64, t0: u64) -> libc::pid_t {
    if raw < 0 {
        crate::real::set_errno((-raw) as c_int);
    }
    let ret = if raw < 0 { -1 } else { raw as libc::pid_t };
    if t0 != 0 {
        let _errno = SavedErrno::new();
        if let Some(busy) = enter() {
            record_process(b"vfork", t0, ticks(), &[Arg::int("ret", ret as i64)]);
            drop(busy);
        }
    }
    ret
}

/// `vfork` stays a vfork: the child borrows this thread's stack until it execs or exits,
/// so no wrapper frame may be live across the call. Like glibc's own `vfork`, the
/// trampoline pops the return address into a register (the parent's registers survive the
/// child), makes the `vfork` system call itself and pushes the address back; the child
/// returns at once, the parent calls [`vfork_after`]. (A `vfork` interposed after this
/// library is therefore bypassed.)
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn vfork() -> libc::pid_t {
    core::arch::naked_asm!(
        // Entry: rsp = 8 mod 16; align for the call.
        "sub rsp, 8",
        "call {before}",
        "add rsp, 8",
        // r8 (start time) and r9 (return address) are preserved by `syscall`, and are
        // caller-saved registers in the ABI, free for us to use.
        "mov r8, rax",
        "pop r9",
        "mov eax, {nr}",
        "syscall",
        "push r9",
        "test rax, rax",
        "jz 2f",
        "sub rsp, 8",
        "mov rdi, rax",
        "mov rsi, r8",
        "call {after}",
        "add rsp, 8",
        "2:",
        "ret",
        before = sym vfork_before,
        after = sym vfork_after,
        nr = const libc::SYS_vfork,
    )
}

/// The `status` a wait call stored, when it stored one.
unsafe fn status_of(status: *const c_int, ret: libc::pid_t) -> i64 {
    if status.is_null() || ret <= 0 {
        -1
    } else {
        *status as i64
    }
}

#[no_mangle]
pub unsafe extern "C" fn wait(status: *mut c_int) -> libc::pid_t {
    let Some(real) = real!(wait: unsafe extern "C" fn(*mut c_int) -> libc::pid_t) else {
        return missing(-1);
    };
    on_process!(real(status), |ret, t0, t1| {
        record_process(
            b"wait",
            t0,
            t1,
            &[
                Arg::int("ret", ret as i64),
                Arg::int("status", status_of(status, ret)),
            ],
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    let Some(real) =
        real!(waitpid: unsafe extern "C" fn(libc::pid_t, *mut c_int, c_int) -> libc::pid_t)
    else {
        return missing(-1);
    };
    on_process!(real(pid, status, options), |ret, t0, t1| {
        record_process(
            b"waitpid",
            t0,
            t1,
            &[
                Arg::int("pid", pid as i64),
                Arg::int("options", options as i64),
                Arg::int("ret", ret as i64),
                Arg::int("status", status_of(status, ret)),
            ],
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn wait4(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    rusage: *mut libc::rusage,
) -> libc::pid_t {
    let Some(real) = real!(wait4: unsafe extern "C" fn(libc::pid_t, *mut c_int, c_int, *mut libc::rusage) -> libc::pid_t)
    else {
        return missing(-1);
    };
    on_process!(real(pid, status, options, rusage), |ret, t0, t1| {
        record_process(
            b"wait4",
            t0,
            t1,
            &[
                Arg::int("pid", pid as i64),
                Arg::int("options", options as i64),
                Arg::int("ret", ret as i64),
                Arg::int("status", status_of(status, ret)),
            ],
        )
    })
}

type SpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const libc::c_void,
    *const libc::c_void,
    *const *mut c_char,
    *const *mut c_char,
) -> c_int;

#[allow(clippy::too_many_arguments)]
unsafe fn spawn_common(
    name: &'static [u8],
    real: SpawnFn,
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const libc::c_void,
    attr: *const libc::c_void,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    on_process!(real(pid, path, actions, attr, argv, envp), |ret, t0, t1| {
        guarded(|| {
            let child = if ret == 0 && !pid.is_null() {
                *pid as i64
            } else {
                -1
            };
            let mut argc = 0i64;
            if !argv.is_null() {
                while !(*argv.add(argc as usize)).is_null() {
                    argc += 1;
                }
            }
            record_process(
                name,
                t0,
                t1,
                &[
                    Arg::int("pid", child),
                    Arg::int("argc", argc),
                    Arg::int("ret", ret as i64),
                    Arg::new("fhash", Value::Path(c_bytes(path).unwrap_or(b""))),
                ],
            );
        })
    })
}

macro_rules! spawn_hook {
    ($($sym:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            pid: *mut libc::pid_t,
            path: *const c_char,
            actions: *const libc::c_void,
            attr: *const libc::c_void,
            argv: *const *mut c_char,
            envp: *const *mut c_char,
        ) -> c_int {
            let Some(real) = real!($sym: SpawnFn) else {
                return libc::ENOSYS;
            };
            spawn_common(stringify!($sym).as_bytes(), real, pid, path, actions, attr, argv, envp)
        }
    )*};
}

// `posix_spawnp`'s second argument is a file name searched in `PATH`, recorded as given.
spawn_hook!(posix_spawn, posix_spawnp);

/// `system(command)`: the shell child is spawned and reaped inside libc, so its pid cannot be
/// observed without reimplementing `system`; the event records the `command` and the status
/// (`ret`), and the child's own trace has this process as its `ppid` and the same command.
#[no_mangle]
pub unsafe extern "C" fn system(command: *const c_char) -> c_int {
    let Some(real) = real!(system: unsafe extern "C" fn(*const c_char) -> c_int) else {
        return missing(-1);
    };
    on_process!(skip_if command.is_null(); real(command), |ret, t0, t1| {
        guarded(|| {
            record_process(
                b"system",
                t0,
                t1,
                &[
                    Arg::new("command", Value::Str(c_bytes(command).unwrap_or(b""))),
                    Arg::int("ret", ret as i64),
                ],
            )
        })
    })
}

/// `SIGKILL` aimed at this process: no handler will see it, so the trace is finished first.
/// Every other signal is left to its delivery (the core's handler stands in for `SIG_DFL`);
/// a blocked signal the program takes with `sigwait`/`signalfd` ends nothing.
#[inline]
fn before_self_kill(to_self: impl FnOnce() -> bool) {
    if dftracer_core::is_running() && real::getpid() == owner_pid() && to_self() {
        let _errno = SavedErrno::new();
        dftracer_core::frontend::before_self_signal(libc::SIGKILL);
    }
}

#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    let Some(real) = real!(kill: unsafe extern "C" fn(libc::pid_t, c_int) -> c_int) else {
        return missing(-1);
    };
    if sig == libc::SIGKILL {
        // This process, its process group, or (pid 0) the caller's group.
        before_self_kill(|| {
            let me = real::getpid();
            pid == me || pid == 0 || (pid < -1 && -pid == libc::getpgrp())
        });
    }
    real(pid, sig)
}

#[no_mangle]
pub unsafe extern "C" fn raise(sig: c_int) -> c_int {
    let Some(real) = real!(raise: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing(-1);
    };
    if sig == libc::SIGKILL {
        before_self_kill(|| true);
    }
    real(sig)
}

#[no_mangle]
pub unsafe extern "C" fn tgkill(tgid: libc::pid_t, tid: libc::pid_t, sig: c_int) -> c_int {
    let Some(real) = real!(tgkill: unsafe extern "C" fn(libc::pid_t, libc::pid_t, c_int) -> c_int)
    else {
        return missing(-1);
    };
    if sig == libc::SIGKILL {
        before_self_kill(|| tgid == real::getpid());
    }
    real(tgid, tid, sig)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_kill(thread: libc::pthread_t, sig: c_int) -> c_int {
    let Some(real) = real!(pthread_kill: unsafe extern "C" fn(libc::pthread_t, c_int) -> c_int)
    else {
        return libc::ENOSYS;
    };
    if sig == libc::SIGKILL {
        // Any thread of this process: SIGKILL ends the whole process.
        before_self_kill(|| true);
    }
    real(thread, sig)
}

#[no_mangle]
pub unsafe extern "C" fn sigqueue(pid: libc::pid_t, sig: c_int, value: libc::sigval) -> c_int {
    let Some(real) =
        real!(sigqueue: unsafe extern "C" fn(libc::pid_t, c_int, libc::sigval) -> c_int)
    else {
        return missing(-1);
    };
    if sig == libc::SIGKILL {
        before_self_kill(|| pid == real::getpid());
    }
    real(pid, sig, value)
}

// ---------------------------------------------------------------- popen, pclose

/// `popen(command, mode)`: a process call (the stream is a pipe to a shell child, which
/// traces itself); records `command`, `mode` and the stream's fd (`ret`, -1 on failure).
#[no_mangle]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut FILE {
    let Some(real) = real!(popen: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE)
    else {
        return missing(std::ptr::null_mut());
    };
    on_process!(real(command, mode), |fp, t0, t1| {
        guarded(|| {
            let fd = if fp.is_null() {
                -1
            } else {
                fileno_unlocked(fp)
            };
            record_process(
                b"popen",
                t0,
                t1,
                &[
                    Arg::new("command", Value::Str(c_bytes(command).unwrap_or(b""))),
                    Arg::new("mode", Value::Str(c_bytes(mode).unwrap_or(b""))),
                    Arg::int("ret", fd as i64),
                ],
            )
        })
    })
}

/// `pclose(fp)`: waits for the `popen` child; records its status (`ret`).
#[no_mangle]
pub unsafe extern "C" fn pclose(fp: *mut FILE) -> c_int {
    let Some(real) = real!(pclose: unsafe extern "C" fn(*mut FILE) -> c_int) else {
        return missing(-1);
    };
    if fp.is_null() || !process_events_on() {
        return real(fp);
    }
    let Some(busy) = enter() else { return real(fp) };
    let fd = fileno_unlocked(fp);
    let t0 = ticks();
    let ret = real(fp);
    let _errno = SavedErrno::new();
    let t1 = ticks();
    guarded(|| {
        record_process(
            b"pclose",
            t0,
            t1,
            &[Arg::int("fd", fd as i64), Arg::int("ret", ret as i64)],
        )
    });
    drop(busy);
    ret
}

// ---------------------------------------------------------------- umask

/// `umask` changes a process attribute, not a file: recorded (`mask`, `ret` = the previous
/// mask) under [`attr_events_on`](super::attr_events_on), never looked up as an fd.
#[no_mangle]
pub unsafe extern "C" fn umask(mask: mode_t) -> mode_t {
    let Some(real) = real!(umask: unsafe extern "C" fn(mode_t) -> mode_t) else {
        // umask cannot fail; with no libc umask there is nothing sane to return.
        return 0o022;
    };
    let off = !super::attr_events_on();
    on_process!(skip_if off; real(mask), |ret, t0, t1| {
        guarded(|| {
            record(
                POSIX,
                b"umask",
                t0,
                t1,
                &[Arg::int("mask", mask as i64), Arg::int("ret", ret as i64)],
            )
        })
    })
}
