//! Planning a pass: which objects are left alone, and which GOT slots of an object get which
//! hook.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::hash::{BuildHasherDefault, Hasher};

use super::elf::{arch, auxv, Dynamic, Image, Object, Rela, AT_BASE, AT_SYSINFO_EHDR};
use super::MARKER;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// JUMP_SLOT or GLOB_DAT: written by the loader only.
    Got,
    /// An absolute pointer in data: written only while it still holds the loader's value.
    Abs,
}

#[derive(Clone, Copy)]
pub(super) struct GotSlot {
    pub(super) addr: usize,
    pub(super) hook: usize,
    /// What the loader stores for this name (`dlsym(RTLD_DEFAULT)`), 0 if unknown.
    pub(super) loader: usize,
    pub(super) kind: Kind,
    /// Bound only over `loader` itself, or over a lazy stub of the slot's own object (a
    /// hook tied to one definition: [`HookEntry::real`](crate::hooks::HookEntry)).
    pub(super) strict: bool,
}

/// One object ready to be written.
pub(super) struct Plan {
    pub(super) base: usize,
    pub(super) name: CString,
    pub(super) img: Image,
    pub(super) slots: Vec<GotSlot>,
}

/// Why an object is left alone (policy, not failure).
pub(super) fn excluded(obj: &Object, d: Option<&Dynamic>, self_addr: usize) -> bool {
    if obj.contains(self_addr) {
        return true;
    }
    let ldso = auxv(AT_BASE);
    if ldso != 0 && (obj.base == ldso || obj.contains(ldso)) {
        return true;
    }
    let vdso = auxv(AT_SYSINFO_EHDR);
    if vdso != 0 && obj.contains(vdso) {
        return true;
    }
    let file = obj.name.as_bytes();
    let file = file.rsplit(|&b| b == b'/').next().unwrap_or(file);
    let soname = d.and_then(|d| d.soname.as_deref()).unwrap_or(file);
    for n in [soname, file] {
        if is_glibc(n) {
            return true;
        }
    }
    matches!(d, Some(d) if d.defines(MARKER.to_bytes()))
}

/// glibc's own objects (sonames of glibc 2.36, merged or not).
pub(super) fn is_glibc(soname: &[u8]) -> bool {
    const EXACT: &[&[u8]] = &[
        b"libc.so.6",
        b"libpthread.so.0",
        b"libdl.so.2",
        b"librt.so.1",
        b"libutil.so.1",
        b"libanl.so.1",
        b"libm.so.6",
        b"libmvec.so.1",
        b"libresolv.so.2",
        b"libBrokenLocale.so.1",
        b"libc_malloc_debug.so.0",
        b"libthread_db.so.1",
        b"linux-vdso.so.1",
        b"linux-gate.so.1",
    ];
    EXACT.contains(&soname) || soname.starts_with(b"ld-linux") || soname.starts_with(b"libnss_")
}

/// Hook name -> (hook address, loader's address, strict), looked up once per relocation of
/// every loaded object (tens of thousands in libpython): hashed with FNV-1a, not SipHash
/// (whose ~100 instructions per short name were most of a binding pass).
pub(super) type HookTable<'a> = HashMap<&'a [u8], (usize, usize, bool), BuildHasherDefault<Fnv>>;

/// FNV-1a, 64 bits: symbol names are short and not chosen by an adversary of this table.
#[derive(Default)]
pub(super) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The slots of `d` to write for `hooks`.
pub(super) fn plan_slots(d: &Dynamic, hooks: &HookTable) -> Vec<GotSlot> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for &(table, size) in &d.relas {
        for k in 0..size / std::mem::size_of::<Rela>() {
            let Some(r) = d.img.read::<Rela>(table + k * std::mem::size_of::<Rela>()) else {
                continue;
            };
            let ty = (r.info & 0xffff_ffff) as u32;
            let si = (r.info >> 32) as usize;
            let kind = if ty == arch::JUMP_SLOT || ty == arch::GLOB_DAT {
                Kind::Got
            } else if ty == arch::ABS64 {
                Kind::Abs
            } else {
                continue;
            };
            if si == 0 || r.addend != 0 && (kind == Kind::Abs || ty == arch::GLOB_DAT) {
                continue;
            }
            let Some(sym) = d.sym(si) else { continue };
            // The object's own definition (an interposer's or self-contained `read`): its
            // internal calls stay its own.
            if sym.shndx != 0 {
                continue;
            }
            let Some(name) = d.str_at(sym.name as usize) else {
                continue;
            };
            let Some(&(hook, loader, strict)) = hooks.get(name) else {
                continue;
            };
            let addr = d.img.base.wrapping_add(r.offset as usize);
            if addr & 7 != 0 || !d.img.readable(addr, 8) || !seen.insert(addr) {
                continue;
            }
            out.push(GotSlot {
                addr,
                hook,
                loader,
                kind,
                strict,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_names() {
        assert!(is_glibc(b"libc.so.6"));
        assert!(is_glibc(b"ld-linux-x86-64.so.2"));
        assert!(is_glibc(b"libnss_files.so.2"));
        assert!(!is_glibc(b"libz.so.1"));
        assert!(!is_glibc(b"libcrypto.so.3"));
    }
}
