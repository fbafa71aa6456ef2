//! Collecting the loaded objects (`dl_iterate_phdr`) and pinning them for a pass
//! (`dlopen(RTLD_NOLOAD)`), and what the loader stores for a name (`dlsym(RTLD_DEFAULT)`).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};

use libc::{c_char, c_int, c_void};

use super::elf::Object;

pub(super) fn collect() -> (Vec<Object>, (u64, u64)) {
    struct Acc {
        objs: Vec<Object>,
        counters: (u64, u64),
    }
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        let r = std::panic::catch_unwind(|| {
            // SAFETY: glibc passes a valid info for the duration of the call; `data` is the
            // `Acc` below, alive and exclusively ours during dl_iterate_phdr.
            let (info, acc) = unsafe { (&*info, &mut *(data as *mut Acc)) };
            acc.counters = (info.dlpi_adds, info.dlpi_subs);
            let name = if info.dlpi_name.is_null() {
                CString::default()
            } else {
                // SAFETY: dlpi_name is a NUL-terminated string owned by ld.so.
                unsafe { CStr::from_ptr(info.dlpi_name) }.to_owned()
            };
            let phdrs = if info.dlpi_phdr.is_null() {
                Vec::new()
            } else {
                // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
                unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
                    .to_vec()
            };
            acc.objs.push(Object {
                base: info.dlpi_addr as usize,
                name,
                phdrs,
            });
        });
        if r.is_err() {
            1
        } else {
            0
        }
    }
    let mut acc = Acc {
        objs: Vec::new(),
        counters: (0, 0),
    };
    // SAFETY: the callback only reads what glibc passes and writes into `acc`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut acc as *mut Acc as *mut c_void) };
    (acc.objs, acc.counters)
}

/// `dlpi_adds`/`dlpi_subs` now (stops after the first object).
pub(super) fn counters() -> (u64, u64) {
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: as in `collect`; `data` is the tuple below.
        unsafe {
            *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs);
        }
        1
    }
    let mut c = (0u64, 0u64);
    // SAFETY: the callback writes only into `c`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut c as *mut (u64, u64) as *mut c_void) };
    c
}

/// A reference on an object that keeps it mapped until dropped (`dlclose`).
pub(super) struct Pin(pub(super) *mut c_void);

impl Drop for Pin {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a handle returned by dlopen, closed once.
            unsafe { libc::dlclose(self.0) };
        }
    }
}

/// Pins `obj`: the main program needs none; others are reopened by name with RTLD_NOLOAD and
/// must be the same mapping (same `l_addr`, i.e. same namespace and not reloaded elsewhere).
pub(super) fn pin(obj: &Object) -> Result<Pin, &'static str> {
    if obj.name.as_bytes().is_empty() {
        return Ok(Pin(std::ptr::null_mut()));
    }
    // SAFETY: a valid C string; NOLOAD never loads anything.
    let h = unsafe {
        libc::dlopen(
            obj.name.as_ptr(),
            libc::RTLD_NOLOAD | libc::RTLD_LAZY | libc::RTLD_LOCAL,
        )
    };
    if h.is_null() {
        return Err("not found by name in the base namespace (dlmopen, or being unloaded)");
    }
    let pin = Pin(h);
    let mut lm: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: h is a live handle; RTLD_DI_LINKMAP writes one pointer.
    let r = unsafe { libc::dlinfo(h, libc::RTLD_DI_LINKMAP, &mut lm as *mut _ as *mut c_void) };
    // SAFETY: on success lm points at the object's public link_map head.
    if r != 0 || lm.is_null() || unsafe { (*lm).l_addr } != obj.base {
        return Err("another object of that name is loaded (dlmopen namespace)");
    }
    Ok(pin)
}

/// The public head of glibc's `struct link_map`.
#[repr(C)]
pub(super) struct LinkMap {
    pub(super) l_addr: usize,
    pub(super) l_name: *const c_char,
    pub(super) l_ld: *const c_void,
    pub(super) l_next: *const LinkMap,
    pub(super) l_prev: *const LinkMap,
}

/// What the loader stores for `name` in an ordinary object: the first definition in the
/// global scope.
pub(super) fn loader_value(name: &CStr) -> usize {
    // SAFETY: valid C string; RTLD_DEFAULT is always a valid pseudo-handle.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::bind::elf::{auxv, Dynamic, AT_SYSINFO_EHDR};

    /// Parses every object of the test process itself, and finds exported symbols.
    #[test]
    fn parses_loaded_objects() {
        let (objs, (adds, _)) = collect();
        assert!(adds as usize >= objs.len());
        let mut libc_seen = false;
        for o in &objs {
            if auxv(AT_SYSINFO_EHDR) != 0 && o.contains(auxv(AT_SYSINFO_EHDR)) {
                continue;
            }
            let d = Dynamic::parse(o).unwrap_or_else(|e| panic!("{}: {e}", o.label()));
            assert!(d.nsyms > 0, "{}", o.label());
            if d.soname.as_deref() == Some(b"libc.so.6") {
                libc_seen = true;
                assert!(d.defines(b"read") && d.defines(b"fopen"));
                assert!(!d.defines(b"no_such_symbol_here"));
            }
        }
        assert!(libc_seen);
    }
}
