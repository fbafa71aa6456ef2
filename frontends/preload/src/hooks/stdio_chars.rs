//! Character, line and formatted stream I/O, and the stream calls around them: character and
//! line I/O (`fgetc`, `getc`, `ungetc`, `fputc`, `putc`, `getline`, `getdelim`, `getw`, `putw`,
//! and the `_unlocked` functions that programs built with gnulib's unlocked-io call), formatted
//! I/O (`fprintf`, `vfprintf`, `fscanf`, `vfscanf` and their `_FORTIFY_SOURCE`/C99 names),
//! positions (`fgetpos`, `fsetpos`, `rewind`) and state (`clearerr`, `feof`, `ferror`,
//! `setvbuf`, `fileno`).
//!
//! `fprintf`, `__fprintf_chk`, `fscanf` and `__isoc99_fscanf` are C-variadic, which stable Rust
//! cannot define: on x86_64 each is a naked trampoline that stores the six integer and eight
//! vector argument registers in a register save area, builds a System V `va_list` over it
//! (`gp_offset` past the named arguments, `fp_offset` 48, `overflow_arg_area` at the caller's
//! first stack argument) and calls Rust, which forwards to the real `v*` function with that
//! `va_list` (what glibc's own `fprintf` does). On other architectures they are not interposed
//! (their `v*` forms are).
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_void, size_t, ssize_t, FILE};

use super::{c_bytes, missing};
use crate::{on_file, real};

/// `f(fp) -> int` calls: `name` is the event name.
macro_rules! file_int {
    ($sym:ident, $name:literal, $fail:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut FILE) -> c_int) else {
                return missing($fail);
            };
            on_file!($name, fp, real(fp), |ret| [ret: I(ret as i64)])
        }
    };
}

file_int!(fgetc, "fgetc", libc::EOF);
file_int!(getc, "getc", libc::EOF);
file_int!(_IO_getc, "getc", libc::EOF);
file_int!(getc_unlocked, "getc_unlocked", libc::EOF);
file_int!(fgetc_unlocked, "fgetc_unlocked", libc::EOF);
file_int!(getw, "getw", libc::EOF);
file_int!(feof, "feof", 0);
file_int!(feof_unlocked, "feof_unlocked", 0);
file_int!(ferror, "ferror", 0);
file_int!(ferror_unlocked, "ferror_unlocked", 0);
file_int!(fileno, "fileno", -1);
file_int!(fflush_unlocked, "fflush_unlocked", libc::EOF);

/// `f(c, fp) -> int` calls.
macro_rules! char_file {
    ($sym:ident, $name:literal) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(c: c_int, fp: *mut FILE) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *mut FILE) -> c_int) else {
                return missing(libc::EOF);
            };
            on_file!($name, fp, real(c, fp), |ret| [ret: I(ret as i64)])
        }
    };
}

char_file!(ungetc, "ungetc");
char_file!(fputc, "fputc");
char_file!(putc, "putc");
char_file!(_IO_putc, "putc");
char_file!(putc_unlocked, "putc_unlocked");
char_file!(fputc_unlocked, "fputc_unlocked");
char_file!(putw, "putw");

/// `f(fp) -> void` calls.
macro_rules! file_void {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE) {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut FILE)) else {
                return;
            };
            on_file!(stringify!($sym), fp, real(fp), |_r| [])
        }
    };
}

file_void!(rewind);
file_void!(clearerr);
file_void!(clearerr_unlocked);

macro_rules! pos {
    ($sym:ident, $ptr:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE, pos: $ptr) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut FILE, $ptr) -> c_int) else {
                return missing(-1);
            };
            on_file!(stringify!($sym), fp, real(fp, pos), |ret| [ret: I(ret as i64)])
        }
    };
}

pos!(fgetpos, *mut c_void);
pos!(fgetpos64, *mut c_void);
pos!(fsetpos, *const c_void);
pos!(fsetpos64, *const c_void);

#[no_mangle]
pub unsafe extern "C" fn setvbuf(
    fp: *mut FILE,
    buf: *mut c_char,
    mode: c_int,
    size: size_t,
) -> c_int {
    let Some(real) =
        real!(setvbuf: unsafe extern "C" fn(*mut FILE, *mut c_char, c_int, size_t) -> c_int)
    else {
        return missing(-1);
    };
    on_file!("setvbuf", fp, real(fp, buf, mode, size), |ret| [
        mode: I(mode as i64),
        size: U(size as u64),
        ret: I(ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn getline(line: *mut *mut c_char, n: *mut size_t, fp: *mut FILE) -> ssize_t {
    let Some(real) =
        real!(getline: unsafe extern "C" fn(*mut *mut c_char, *mut size_t, *mut FILE) -> ssize_t)
    else {
        return missing(-1);
    };
    on_file!("getline", fp, real(line, n, fp), |ret| [ret: I(ret as i64)])
}

macro_rules! getdelim_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(line: *mut *mut c_char, n: *mut size_t, delim: c_int, fp: *mut FILE) -> ssize_t {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut *mut c_char, *mut size_t, c_int, *mut FILE) -> ssize_t) else {
                return missing(-1);
            };
            on_file!("getdelim", fp, real(line, n, delim, fp), |ret| [
                delim: I(delim as i64),
                ret: I(ret as i64)
            ])
        }
    };
}

getdelim_hook!(getdelim);
getdelim_hook!(__getdelim);

macro_rules! rw_unlocked {
    ($sym:ident, $ptr:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(ptr: $ptr, size: size_t, n: size_t, fp: *mut FILE) -> size_t {
            let Some(real) = real!($sym: unsafe extern "C" fn($ptr, size_t, size_t, *mut FILE) -> size_t) else {
                return missing(0);
            };
            on_file!(stringify!($sym), fp, real(ptr, size, n, fp), |ret| [
                size: U(size as u64),
                count: U(n as u64),
                ret: U(ret as u64)
            ])
        }
    };
}

rw_unlocked!(fread_unlocked, *mut c_void);
rw_unlocked!(fwrite_unlocked, *const c_void);

#[no_mangle]
pub unsafe extern "C" fn fputs_unlocked(s: *const c_char, fp: *mut FILE) -> c_int {
    let Some(real) = real!(fputs_unlocked: unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int)
    else {
        return missing(libc::EOF);
    };
    on_file!("fputs_unlocked", fp, real(s, fp), |ret| [
        count: U(c_bytes(s).map_or(0, |b| b.len() as u64)),
        ret: I(ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn fgets_unlocked(s: *mut c_char, n: c_int, fp: *mut FILE) -> *mut c_char {
    let Some(real) =
        real!(fgets_unlocked: unsafe extern "C" fn(*mut c_char, c_int, *mut FILE) -> *mut c_char)
    else {
        return missing(std::ptr::null_mut());
    };
    on_file!("fgets_unlocked", fp, real(s, n, fp), |ret| [
        count: I(n as i64),
        ret: I(if ret.is_null() { -1 } else { c_bytes(ret).map_or(-1, |b| b.len() as i64) })
    ])
}

// ---------------------------------------------------------------- formatted I/O

/// `va_list` is passed as a pointer (x86_64: to the one-element array; aarch64: the 32-byte
/// struct is passed by reference), so the `v*` hooks forward it as an opaque pointer.
type VFn = unsafe extern "C" fn(*mut FILE, *const c_char, *mut c_void) -> c_int;
type VChkFn = unsafe extern "C" fn(*mut FILE, c_int, *const c_char, *mut c_void) -> c_int;

macro_rules! v_hook {
    ($sym:ident, $name:literal) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int {
            let Some(real) = real!($sym: VFn) else {
                return missing(-1);
            };
            on_file!($name, fp, real(fp, fmt, ap), |ret| [ret: I(ret as i64)])
        }
    };
}

v_hook!(vfprintf, "vfprintf");
v_hook!(vfscanf, "vfscanf");
v_hook!(__isoc99_vfscanf, "vfscanf");

#[no_mangle]
pub unsafe extern "C" fn __vfprintf_chk(
    fp: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
) -> c_int {
    let Some(real) = real!(__vfprintf_chk: VChkFn) else {
        return missing(-1);
    };
    on_file!("vfprintf", fp, real(fp, flag, fmt, ap), |ret| [ret: I(ret as i64)])
}

/// The Rust side of the variadic trampolines: `regs` is the register save area (six integer
/// registers, then eight vector registers), `ap` the `va_list` built over it.
#[cfg(target_arch = "x86_64")]
mod variadic {
    use super::*;

    macro_rules! va_impl {
        ($imp:ident, $real:ident, $name:literal) => {
            pub(super) unsafe extern "C" fn $imp(regs: *const usize, ap: *mut c_void) -> c_int {
                let fp = *regs as *mut FILE;
                let fmt = *regs.add(1) as *const c_char;
                let Some(real) = real!($real: VFn) else {
                    return missing(-1);
                };
                on_file!($name, fp, real(fp, fmt, ap), |ret| [ret: I(ret as i64)])
            }
        };
    }

    va_impl!(fprintf_imp, vfprintf, "fprintf");
    va_impl!(fscanf_imp, vfscanf, "fscanf");
    va_impl!(isoc99_fscanf_imp, __isoc99_vfscanf, "fscanf");

    pub(super) unsafe extern "C" fn fprintf_chk_imp(regs: *const usize, ap: *mut c_void) -> c_int {
        let fp = *regs as *mut FILE;
        let flag = *regs.add(1) as c_int;
        let fmt = *regs.add(2) as *const c_char;
        let Some(real) = real!(__vfprintf_chk: VChkFn) else {
            return missing(-1);
        };
        on_file!("fprintf", fp, real(fp, flag, fmt, ap), |ret| [ret: I(ret as i64)])
    }
}

/// A C-variadic entry point with `$named` named integer arguments: see the module docs.
#[cfg(target_arch = "x86_64")]
macro_rules! va_trampoline {
    ($sym:ident, $named:expr, $imp:path) => {
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE, fmt: *const c_char) -> c_int {
            core::arch::naked_asm!(
                // Entry: rsp = 8 mod 16. 216 bytes: the 176-byte register save area at rsp
                // (vector part 16-aligned at +48), the 24-byte va_list at +176.
                "sub rsp, 216",
                "mov [rsp], rdi",
                "mov [rsp + 8], rsi",
                "mov [rsp + 16], rdx",
                "mov [rsp + 24], rcx",
                "mov [rsp + 32], r8",
                "mov [rsp + 40], r9",
                "movaps [rsp + 48], xmm0",
                "movaps [rsp + 64], xmm1",
                "movaps [rsp + 80], xmm2",
                "movaps [rsp + 96], xmm3",
                "movaps [rsp + 112], xmm4",
                "movaps [rsp + 128], xmm5",
                "movaps [rsp + 144], xmm6",
                "movaps [rsp + 160], xmm7",
                "mov dword ptr [rsp + 176], {gp}",
                "mov dword ptr [rsp + 180], 48",
                // The caller's first stack argument: above our 216 bytes and the return address.
                "lea rax, [rsp + 224]",
                "mov [rsp + 184], rax",
                "mov [rsp + 192], rsp",
                "mov rdi, rsp",
                "lea rsi, [rsp + 176]",
                "call {imp}",
                "add rsp, 216",
                "ret",
                gp = const 8 * $named,
                imp = sym $imp,
            )
        }
    };
}

#[cfg(target_arch = "x86_64")]
va_trampoline!(fprintf, 2, variadic::fprintf_imp);
#[cfg(target_arch = "x86_64")]
va_trampoline!(__fprintf_chk, 3, variadic::fprintf_chk_imp);
#[cfg(target_arch = "x86_64")]
va_trampoline!(fscanf, 2, variadic::fscanf_imp);
#[cfg(target_arch = "x86_64")]
va_trampoline!(__isoc99_fscanf, 2, variadic::isoc99_fscanf_imp);
