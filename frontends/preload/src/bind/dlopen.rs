//! The `dlopen` wrapper: opens as the calling object would have (see "`dlopen` and the
//! caller's RUNPATH" in [`super`]), then binds what appeared.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{CStr, CString};

use libc::{c_char, c_int, c_void};

use super::elf::{arch, auxv};
use super::lock::Guard;
use super::pin::{counters, LinkMap, Pin};
use super::{pass, warn, SELF_ANCHOR};
#[cfg(not(test))]
use crate::hooks::HookEntry;

/// `dladdr1` flag: return the `link_map`.
const RTLD_DL_LINKMAP: c_int = 2;
/// `getauxval`: secure (setuid) mode.
const AT_SECURE: libc::c_ulong = 23;

thread_local! {
    /// Depth of wrapped `dlopen` calls on this thread (constructors may dlopen).
    static DLOPEN_DEPTH: Cell<u32> = const { Cell::new(0) };
}

pub(super) type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;

#[cfg(all(not(test), any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn dlopen_hook() -> Option<HookEntry> {
    Some(HookEntry {
        name: c"dlopen",
        addr: dlopen_entry as *const (),
        real: 0,
    })
}

#[cfg(all(not(test), not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub(super) fn dlopen_hook() -> Option<HookEntry> {
    None
}

/// `dlopen(file, mode)` entry: passes the caller's return address as a third argument.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn dlopen_entry(file: *const c_char, mode: c_int) -> *mut c_void {
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {imp}", imp = sym dlopen_wrapper)
}

/// `dlopen(file, mode)` entry: passes the caller's return address as a third argument.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
unsafe extern "C" fn dlopen_entry(file: *const c_char, mode: c_int) -> *mut c_void {
    core::arch::naked_asm!("mov x2, x30", "b {imp}", imp = sym dlopen_wrapper)
}

/// The wrapped `dlopen`: opens as the caller would have (see "dlopen and the caller's
/// RUNPATH"), then binds what appeared (outermost call only), keeping `errno`.
///
/// # Safety
/// Called by C code with `dlopen`'s arguments; `ret` is the caller's return address.
unsafe extern "C" fn dlopen_wrapper(file: *const c_char, mode: c_int, ret: usize) -> *mut c_void {
    let Some(real) = crate::real!(dlopen: DlopenFn) else {
        crate::real::set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    let depth = DLOPEN_DEPTH
        .try_with(|d| d.replace(d.get() + 1))
        .unwrap_or(1);
    // SAFETY: forwarded dlopen contract.
    let h = crate::guarded_or(None, || unsafe { open_as_caller(real, file, mode, ret) })
        // SAFETY: forwarded dlopen contract (the wrapper itself failed: plain call).
        .unwrap_or_else(|| unsafe { real(file, mode) });
    let _ = DLOPEN_DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    if depth == 0 && !h.is_null() {
        let _errno = crate::SavedErrno::new();
        crate::guarded(rebind_new);
    }
    h
}

/// Binds objects that appeared since the last pass over the installed hooks.
pub(super) fn rebind_new() {
    let now = counters();
    let installed = {
        let mut g = Guard::lock();
        let st = g.record();
        match st.installed {
            Some(h) if st.seen != now => h,
            _ => return,
        }
    };
    let r = pass(installed, true);
    warn(&r);
    #[cfg(not(test))]
    super::after_pass(&r);
}

/// `dlopen` as the object containing `ret` would have done it. `None` only if this code
/// panicked before calling `real` (the caller then calls it plainly).
///
/// # Safety
/// `file` is NULL or a C string, as `dlopen` requires.
pub(super) unsafe fn open_as_caller(
    real: DlopenFn,
    file: *const c_char,
    mode: c_int,
    ret: usize,
) -> Option<*mut c_void> {
    // `real` is the last dynamic-linker call made: `dlerror()` then reports its outcome (glibc
    // resets the error state at every dl* call, so the pins are released before it).
    let target = if file.is_null() {
        Target::Plain
    } else {
        // SAFETY: non-null C string per dlopen's contract.
        let name = unsafe { CStr::from_ptr(file) }.to_bytes();
        let _busy = crate::enter();
        target(name, mode, ret)
    };
    Some(match target {
        // SAFETY: forwarded dlopen contract.
        Target::Plain => unsafe { real(file, mode) },
        // SAFETY: `p` is a C string; `mode` is the caller's.
        Target::Path(p) => unsafe { real(p.as_ptr(), mode) },
        Target::Loaded(h) => h,
    })
}

pub(super) enum Target {
    /// Call `dlopen(file, mode)` unchanged.
    Plain,
    /// Call it with this path instead (found in the caller's search list, or `$ORIGIN`
    /// expanded for the caller).
    Path(CString),
    /// Already loaded: this handle (from `RTLD_NOLOAD` with the caller's mode).
    Loaded(*mut c_void),
}

pub(super) fn target(name: &[u8], mode: c_int, ret: usize) -> Target {
    let bare = !name.contains(&b'/');
    let origin =
        name.windows(7).any(|w| w == b"$ORIGIN") || name.windows(9).any(|w| w == b"${ORIGIN}");
    if !bare && !origin {
        return Target::Plain;
    }
    let Some(caller) = caller_handle(ret) else {
        return Target::Plain;
    };
    if !bare {
        if auxv(AT_SECURE) != 0 {
            return Target::Plain;
        }
        let Some(o) = info_origin(caller.0) else {
            return Target::Plain;
        };
        let mut s = name.to_vec();
        for pat in [&b"${ORIGIN}"[..], b"$ORIGIN"] {
            s = replace(&s, pat, &o);
        }
        return CString::new(s).map_or(Target::Plain, Target::Path);
    }
    let Ok(cname) = CString::new(name) else {
        return Target::Plain;
    };
    // Already loaded (by name or soname): glibc answers that before any path search.
    // SAFETY: a C string; NOLOAD never loads.
    let h = unsafe { libc::dlopen(cname.as_ptr(), mode | libc::RTLD_NOLOAD) };
    if !h.is_null() {
        return Target::Loaded(h);
    }
    let mine = self_handle()
        .and_then(|h| search_list(h.0))
        .unwrap_or_default();
    let theirs = search_list(caller.0).unwrap_or_default();
    let common = theirs
        .iter()
        .rev()
        .zip(mine.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    for dir in &theirs[..theirs.len() - common] {
        let mut p = dir.clone();
        if !p.ends_with(b"/") {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        if let Ok(c) = CString::new(p) {
            if is_loadable_elf(&c) {
                return Target::Path(c);
            }
        }
    }
    Target::Plain
}

pub(super) fn replace(s: &[u8], pat: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + with.len());
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(pat) {
            out.extend_from_slice(with);
            i += pat.len();
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// A pinned handle of the object containing `addr` (the main program: `dlopen(NULL)`), when it
/// is in the base namespace and is not this library.
pub(super) fn caller_handle(addr: usize) -> Option<Pin> {
    let mut info: libc::Dl_info = unsafe_zeroed_dl_info();
    let mut lm: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: dladdr1 fills `info` and writes one link_map pointer into `lm`.
    let r = unsafe {
        libc::dladdr1(
            addr as *const c_void,
            &mut info,
            &mut lm as *mut *mut LinkMap as *mut *mut c_void,
            RTLD_DL_LINKMAP,
        )
    };
    if r == 0 || lm.is_null() {
        return None;
    }
    let me = self_handle()?;
    // SAFETY: lm is the caller's live link_map (the caller is executing in it).
    let (l_addr, l_name) = unsafe { ((*lm).l_addr, (*lm).l_name) };
    let mut mine: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: `me` is a live handle.
    unsafe {
        libc::dlinfo(
            me.0,
            libc::RTLD_DI_LINKMAP,
            &mut mine as *mut _ as *mut c_void,
        )
    };
    if std::ptr::eq(mine, lm) {
        return None;
    }
    // SAFETY: l_name is NULL or a C string owned by ld.so.
    let empty = l_name.is_null() || unsafe { *l_name } == 0;
    // SAFETY: NULL or the caller's own name; NOLOAD never loads.
    let h = unsafe {
        libc::dlopen(
            if empty { std::ptr::null() } else { l_name },
            libc::RTLD_NOLOAD | libc::RTLD_LAZY,
        )
    };
    if h.is_null() {
        return None;
    }
    let pin = Pin(h);
    let mut got: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: live handle.
    let r = unsafe { libc::dlinfo(h, libc::RTLD_DI_LINKMAP, &mut got as *mut _ as *mut c_void) };
    // SAFETY: on success `got` is a live link_map.
    (r == 0 && !got.is_null() && unsafe { (*got).l_addr } == l_addr).then_some(pin)
}

pub(super) fn unsafe_zeroed_dl_info() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    }
}

/// A pinned handle of this library.
pub(super) fn self_handle() -> Option<Pin> {
    let mut info = unsafe_zeroed_dl_info();
    // SAFETY: dladdr fills `info` for an address of this library.
    if unsafe { libc::dladdr(&SELF_ANCHOR as *const u8 as *const c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: our own file name; NOLOAD never loads.
    let h = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    (!h.is_null()).then_some(Pin(h))
}

/// `dlinfo(RTLD_DI_ORIGIN)`.
pub(super) fn info_origin(h: *mut c_void) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; crate::PATH_MAX + 1];
    // SAFETY: glibc writes the origin (at most PATH_MAX bytes + NUL) into buf.
    let r = unsafe { libc::dlinfo(h, libc::RTLD_DI_ORIGIN, buf.as_mut_ptr() as *mut c_void) };
    if r != 0 {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0)?;
    buf.truncate(n);
    Some(buf)
}

#[repr(C)]
pub(super) struct SerPath {
    pub(super) name: *const c_char,
    pub(super) flags: libc::c_uint,
}

#[repr(C)]
pub(super) struct SerInfo {
    pub(super) size: usize,
    pub(super) cnt: libc::c_uint,
    // followed by `cnt` SerPath
}

/// The library search list glibc uses for a bare-name `dlopen` from the object `h`
/// (`RTLD_DI_SERINFO`), in order.
pub(super) fn search_list(h: *mut c_void) -> Option<Vec<Vec<u8>>> {
    let mut sz = SerInfo { size: 0, cnt: 0 };
    // SAFETY: SERINFOSIZE fills the two header fields.
    if unsafe {
        libc::dlinfo(
            h,
            libc::RTLD_DI_SERINFOSIZE,
            &mut sz as *mut _ as *mut c_void,
        )
    } != 0
    {
        return None;
    }
    if sz.size < std::mem::size_of::<SerInfo>() {
        return Some(Vec::new());
    }
    // u64 storage: aligned for the header and the pointers in it.
    let mut buf = vec![0u64; sz.size.div_ceil(8)];
    let p = buf.as_mut_ptr() as *mut SerInfo;
    // SAFETY: buf is sz.size bytes, 8-aligned; the header is initialised as glibc requires.
    unsafe {
        (*p).size = sz.size;
        (*p).cnt = sz.cnt;
        if libc::dlinfo(h, libc::RTLD_DI_SERINFO, p as *mut c_void) != 0 {
            return None;
        }
    }
    let first = std::mem::size_of::<SerInfo>().next_multiple_of(std::mem::align_of::<SerPath>());
    let mut out = Vec::new();
    for i in 0..sz.cnt as usize {
        // SAFETY: glibc wrote `cnt` entries after the header, inside buf, whose names point
        // into buf as well.
        let e = unsafe { &*((p as *const u8).add(first) as *const SerPath).add(i) };
        if !e.name.is_null() {
            // SAFETY: a NUL-terminated string inside buf.
            out.push(unsafe { CStr::from_ptr(e.name) }.to_bytes().to_vec());
        }
    }
    Some(out)
}

/// True when `path` is an ELF object of this machine's class and architecture (what glibc
/// checks before accepting a candidate in a search directory).
pub(super) fn is_loadable_elf(path: &CStr) -> bool {
    // SAFETY: a C string; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut h = [0u8; 20];
    // SAFETY: reads at most 20 bytes into h.
    let n = unsafe { libc::read(fd, h.as_mut_ptr() as *mut c_void, h.len()) };
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    n == 20
        && h[..4] == *b"\x7fELF"
        && h[4] == 2
        && h[5] == 1
        && u16::from_le_bytes([h[18], h[19]]) == arch::EM
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_origin() {
        assert_eq!(replace(b"$ORIGIN/x/$ORIGIN", b"$ORIGIN", b"/a"), b"/a/x//a");
    }
}
