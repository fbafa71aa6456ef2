//! I/O tracing without `LD_PRELOAD`: rewrite the GOT slots of the process's loaded objects so
//! that their calls to `read`, `fopen`, ... reach this library's hooks.
//!
//! When tracing is started from the Python or C API, this library is loaded by `dlopen`
//! (`RTLD_LOCAL`) or linked by the program, and the dynamic linker keeps binding the program's
//! calls to libc. [`bind_all`] walks every loaded object (`dl_iterate_phdr`), reads its dynamic
//! section, and for every relocation of type `JUMP_SLOT`, `GLOB_DAT` or absolute 64-bit (with
//! addend 0) whose symbol is a hooked name, stores the hook's address into the slot. Calls made
//! through the PLT, through `-fno-plt` GOT loads, and through function pointers the loader
//! filled in (`R_X86_64_64`) then go to the hook, which records and forwards to the real
//! function ([`crate::real`]).
//!
//! [`bind_io_in_process`] is the entry point: it binds [`HOOKS`](crate::hooks::HOOKS) plus a
//! private `dlopen` wrapper (not exported, so `LD_PRELOAD` users are unaffected), so that objects
//! loaded later (`ctypes.CDLL`, Python extensions imported later, `dlopen` from C) are bound
//! before `dlopen` returns. It is idempotent; `dftracer_bind_io()` is its C entry point.
//! Binding does not start tracing: the hooks record only while the core runs (today: started by
//! the library constructor from `DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD`), and are plain
//! forwards otherwise. So nothing has to be unbound at finalize; a `fork` child inherits the
//! rewritten slots, which is what it needs.
//!
//! # What is never patched
//! - this library, and any object defining [`MARKER`] (`dftracer_core_marker`: every object that
//!   embeds the tracer must export it; the Python extension does);
//! - the dynamic linker (`AT_BASE`), the vDSO (`AT_SYSINFO_EHDR`), and glibc's own objects by
//!   soname (`libc.so.6`, the 2.34+ stubs `libpthread`, `libdl`, `librt`, `libutil`, `libanl`,
//!   and `libm`, `libmvec`, `libresolv`, `libnss_*`): libc's internal calls stay internal, so a
//!   `fopen` is one STDIO event and never also a POSIX `open`;
//! - objects in another link-map namespace (`dlmopen`): they cannot be pinned from the base
//!   namespace (below) and are reported;
//! - a slot whose symbol the object defines itself (an interposer's or a self-contained
//!   library's own `read`), a slot holding 0 (weak, unresolved), an absolute slot whose value is
//!   no longer what the loader stored (the program changed it).
//!
//! # Concurrency
//! - A pass first collects and *pins* the objects (`dlopen(name, RTLD_NOLOAD)`, which also waits
//!   for a concurrent `dlopen` to finish relocating; the handle's `l_addr` must equal the base
//!   `dl_iterate_phdr` reported, which catches an object unloaded and another loaded at the same
//!   base), parses them and resolves the loader's values (`dlsym`). Only then does it take the
//!   binder lock, under which it makes **no** dynamic-linker call and runs no user code: it only
//!   toggles page protections and stores. The lock order is therefore "dynamic linker lock,
//!   then binder lock", never the reverse (a `dlopen` from a constructor cannot deadlock).
//!   The pins are released (`dlclose`, which may run destructors) after the lock is released.
//! - Stores are aligned 8-byte atomic stores: a thread calling through a slot sees the old or
//!   the new target, both valid functions that end in the same real call.
//! - A slot in a read-only page (`PT_GNU_RELRO`, as ld.so rounds it, or a segment without
//!   `PF_W`) is made writable with `mprotect` for the store and put back to the protection the
//!   phdrs give it (`PROT_READ` for RELRO, the segment's flags otherwise). The binder lock
//!   serialises binders, so two binders never race on a page's protection.
//! - **Lazy binding race.** A not-yet-resolved `JUMP_SLOT` points at the PLT stub; when a thread
//!   makes the first call, ld.so's `_dl_fixup` looks the symbol up and stores the result into
//!   the slot, without any lock we could take. If our store lands between its lookup and its
//!   store, the slot ends up at the real function: that object's calls to that one function go
//!   untraced (never a wrong call). A pass re-reads every slot it wrote once all objects are
//!   done and rewrites those that now hold the loader's value, which closes the window except
//!   for a resolution still in flight at that moment; the next [`bind_all`] (or
//!   [`bind_io_in_process`]) repairs that too. Objects linked with `-z now` (full RELRO) or
//!   built with `-fno-plt` have no lazy slots.
//! - `dlopen` wrapper: a `dlopen` nested in another one (a constructor) does not bind; the
//!   outermost one binds everything that appeared. `dl_iterate_phdr`'s `dlpi_adds`/`dlpi_subs`
//!   make the common "nothing new" case one call; when only `adds` moved, objects already bound
//!   (same base and name) are skipped; when `subs` moved, every object is scanned again
//!   (cheap, and the only safe answer to "unloaded and reloaded at the same base").
//! - `fork`: the child keeps the rewritten slots; an `atfork` child handler resets the binder
//!   lock and forgets its record (a thread that held it does not exist in the child).
//! - No allocation happens on a hook's path; binding (and the `dlopen` wrapper) allocate.
//!
//! # `dlopen` and the caller's RUNPATH
//! glibc picks the *calling object* from `dlopen`'s return address: it decides the `$ORIGIN` of
//! a `$ORIGIN/...` name, the `DT_RUNPATH`/`DT_RPATH` directories searched for a bare name (no
//! `/`), and the namespace. A wrapper that calls the real `dlopen` makes this library the
//! caller. The wrapper (an x86_64/aarch64 trampoline that hands the return address over)
//! therefore finds the real caller's object and, for bare names, first asks whether the name
//! is already loaded (`RTLD_NOLOAD`, which glibc checks before any search for every caller),
//! then takes the caller's search list from glibc itself (`dlinfo(RTLD_DI_SERINFO)`: its RPATHs
//! and their loaders', `LD_LIBRARY_PATH`, its RUNPATH, then the system directories, in glibc's
//! order), drops the system directories (the suffix it shares with this library's own list, so
//! that `ld.so.cache` keeps its place before them), and opens the first `dir/name` that is an
//! ELF file of this machine by its full path; with no such file it calls `dlopen(name)`.
//! `$ORIGIN`/`${ORIGIN}` in a name with `/` is replaced with the caller's origin
//! (`RTLD_DI_ORIGIN`) except in secure (setuid) mode. Known differences from a direct call:
//! `glibc-hwcaps` subdirectories of the caller's own directories are not probed; when the caller
//! has no RUNPATH, the RPATHs of *this* library's loaders are searched after the caller's;
//! a name found through the caller's path is recorded by glibc under its full path (its
//! soname still matches later bare-name loads). On other architectures `dlopen` is not wrapped
//! (objects loaded later are bound at the next explicit [`bind_all`]).
//!
//! Symbol versions are not compared: on x86_64 and aarch64 glibc 2.36 every hooked name has a
//! single version (`dlopen`'s two versions are one function).
#![allow(unsafe_code)]

use std::cell::{Cell, UnsafeCell};
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use libc::{c_char, c_int, c_void};

use crate::hooks::Hook;

/// The exported data symbol that marks an object embedding the tracer: such objects are never
/// patched (their I/O is the tracer's own). The Python extension module exports it too.
pub const MARKER: &CStr = c"dftracer_core_marker";

/// The marker itself (see [`MARKER`]).
#[cfg(not(test))]
#[no_mangle]
#[used]
pub static dftracer_core_marker: u8 = 1;

/// What a pass did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Objects `dl_iterate_phdr` listed.
    pub objects: usize,
    /// Objects left alone by policy (this library, tracer copies, ld.so, vDSO, glibc).
    pub excluded: usize,
    /// Objects skipped because an earlier pass bound them and nothing was unloaded since.
    pub unchanged: usize,
    /// Objects whose relocations were scanned.
    pub scanned: usize,
    /// Slots written by this pass.
    pub slots: usize,
    /// Slots that already held the hook.
    pub already: usize,
    /// Objects (name, or `<main>`) that could not be bound, and why.
    pub failed: Vec<(String, String)>,
}

impl Report {
    /// The one stderr line for this pass, when something could not be bound.
    pub fn warn_line(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .failed
            .iter()
            .map(|(o, why)| format!("{o} ({why})"))
            .collect();
        Some(format!(
            "[DFTRACER WARN] I/O binding: {} object(s) not bound, their calls are not traced: {}",
            self.failed.len(),
            list.join(", ")
        ))
    }
}

// ---------------------------------------------------------------- ELF

#[cfg(target_arch = "x86_64")]
mod arch {
    pub const JUMP_SLOT: u32 = 7; // R_X86_64_JUMP_SLOT
    pub const GLOB_DAT: u32 = 6; // R_X86_64_GLOB_DAT
    pub const ABS64: u32 = 1; // R_X86_64_64
    pub const EM: u16 = 62; // EM_X86_64
    pub const SUPPORTED: bool = true;
}
#[cfg(target_arch = "aarch64")]
mod arch {
    pub const JUMP_SLOT: u32 = 1026; // R_AARCH64_JUMP_SLOT
    pub const GLOB_DAT: u32 = 1025; // R_AARCH64_GLOB_DAT
    pub const ABS64: u32 = 257; // R_AARCH64_ABS64
    pub const EM: u16 = 183; // EM_AARCH64
    pub const SUPPORTED: bool = true;
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    pub const JUMP_SLOT: u32 = u32::MAX;
    pub const GLOB_DAT: u32 = u32::MAX;
    pub const ABS64: u32 = u32::MAX;
    pub const EM: u16 = 0;
    pub const SUPPORTED: bool = false;
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_HASH: i64 = 4;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_RELAENT: i64 = 9;
const DT_STRSZ: i64 = 10;
const DT_SONAME: i64 = 14;
const DT_REL: i64 = 17;
const DT_PLTREL: i64 = 20;
const DT_JMPREL: i64 = 23;
const DT_GNU_HASH: i64 = 0x6fff_fef5;

/// `dladdr1` flag: return the `link_map`.
const RTLD_DL_LINKMAP: c_int = 2;

const AT_PAGESZ: libc::c_ulong = 6;
const AT_BASE: libc::c_ulong = 7;
const AT_SECURE: libc::c_ulong = 23;
const AT_SYSINFO_EHDR: libc::c_ulong = 33;

#[repr(C)]
#[derive(Clone, Copy)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// One loaded object as `dl_iterate_phdr` described it.
struct Object {
    base: usize,
    /// `dlpi_name` (empty for the main program).
    name: CString,
    phdrs: Vec<libc::Elf64_Phdr>,
}

impl Object {
    fn label(&self) -> String {
        if self.name.as_bytes().is_empty() {
            "<main>".into()
        } else {
            self.name.to_string_lossy().into_owned()
        }
    }

    /// The mapped segments: (start, end, p_flags).
    fn loads(&self) -> Vec<(usize, usize, u32)> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .filter_map(|p| {
                let s = self.base.checked_add(p.p_vaddr as usize)?;
                Some((s, s.checked_add(p.p_memsz as usize)?, p.p_flags))
            })
            .collect()
    }

    fn contains(&self, addr: usize) -> bool {
        self.loads().iter().any(|&(s, e, _)| addr >= s && addr < e)
    }
}

/// Bounds-checked reads of one object's mapped memory.
struct Image {
    base: usize,
    loads: Vec<(usize, usize, u32)>,
    /// The pages ld.so made read-only after relocation (start, end), page-rounded as it does.
    relro: Option<(usize, usize)>,
}

impl Image {
    fn readable(&self, addr: usize, len: usize) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.loads
            .iter()
            .any(|&(s, e, f)| f & PF_R != 0 && addr >= s && end <= e)
    }

    fn read<T: Copy>(&self, addr: usize) -> Option<T> {
        if !self.readable(addr, std::mem::size_of::<T>()) {
            return None;
        }
        // SAFETY: [addr, addr + size) lies in a readable PT_LOAD segment of an object pinned
        // for the whole pass; unaligned reads are allowed by read_unaligned.
        Some(unsafe { std::ptr::read_unaligned(addr as *const T) })
    }

    /// A dynamic-section address: glibc relocates most `d_ptr` values in place (adds the base),
    /// but not when the section is read-only; accept both.
    fn dyn_ptr(&self, v: u64) -> Option<usize> {
        let v = v as usize;
        if self.readable(v, 1) {
            return Some(v);
        }
        let a = v.checked_add(self.base)?;
        self.readable(a, 1).then_some(a)
    }

    /// The NUL-terminated string at `addr`, at most `max` bytes.
    fn cstr(&self, addr: usize, max: usize) -> Option<&[u8]> {
        let mut n = 0;
        while n < max {
            let b: u8 = self.read(addr + n)?;
            if b == 0 {
                // SAFETY: the n bytes before the NUL were just read through the bounds check.
                return Some(unsafe { std::slice::from_raw_parts(addr as *const u8, n) });
            }
            n += 1;
        }
        None
    }

    /// The protection the page at `page` has after ld.so finished with the object.
    fn page_prot(&self, page: usize) -> Option<c_int> {
        if let Some((s, e)) = self.relro {
            if page >= s && page < e {
                return Some(libc::PROT_READ);
            }
        }
        let &(_, _, f) = self
            .loads
            .iter()
            .find(|&&(s, e, _)| page + page_size() > s && page < e)?;
        let mut p = 0;
        if f & PF_R != 0 {
            p |= libc::PROT_READ;
        }
        if f & PF_W != 0 {
            p |= libc::PROT_WRITE;
        }
        if f & PF_X != 0 {
            p |= libc::PROT_EXEC;
        }
        Some(p)
    }
}

fn page_size() -> usize {
    static PS: AtomicUsize = AtomicUsize::new(0);
    let p = PS.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: getauxval has no preconditions.
    let p = match unsafe { libc::getauxval(AT_PAGESZ) } as usize {
        0 => 4096,
        p => p,
    };
    PS.store(p, Ordering::Relaxed);
    p
}

fn auxv(t: libc::c_ulong) -> usize {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(t) as usize }
}

/// The parsed dynamic section of one object.
struct Dynamic {
    img: Image,
    symtab: usize,
    strtab: usize,
    strsz: usize,
    nsyms: usize,
    gnu_hash: Option<usize>,
    sysv_hash: Option<usize>,
    soname: Option<Vec<u8>>,
    /// (address, byte size) of the RELA tables.
    relas: Vec<(usize, usize)>,
}

impl Dynamic {
    fn parse(obj: &Object) -> Result<Dynamic, String> {
        let ps = page_size();
        let relro = obj
            .phdrs
            .iter()
            .find(|p| p.p_type == PT_GNU_RELRO)
            .map(|p| {
                let s = obj.base + p.p_vaddr as usize;
                let e = s + p.p_memsz as usize;
                (s & !(ps - 1), e & !(ps - 1))
            });
        let img = Image {
            base: obj.base,
            loads: obj.loads(),
            relro,
        };
        let dynph = obj
            .phdrs
            .iter()
            .find(|p| p.p_type == PT_DYNAMIC)
            .ok_or("no PT_DYNAMIC")?;
        let dyn_addr = obj.base + dynph.p_vaddr as usize;
        let n = dynph.p_memsz as usize / std::mem::size_of::<Dyn>();
        let mut v: HashMap<i64, u64> = HashMap::new();
        for i in 0..n {
            let d: Dyn = img
                .read(dyn_addr + i * std::mem::size_of::<Dyn>())
                .ok_or("dynamic section not mapped")?;
            if d.tag == DT_NULL {
                break;
            }
            v.entry(d.tag).or_insert(d.val);
        }
        let ptr = |tag: i64| -> Result<Option<usize>, String> {
            match v.get(&tag) {
                None => Ok(None),
                Some(&x) => img
                    .dyn_ptr(x)
                    .map(Some)
                    .ok_or_else(|| format!("dynamic tag {tag:#x} points outside the object")),
            }
        };
        if v.contains_key(&DT_REL) || v.get(&DT_PLTREL) == Some(&(DT_REL as u64)) {
            return Err("REL relocations (only RELA is supported)".into());
        }
        let symtab = ptr(DT_SYMTAB)?.ok_or("no DT_SYMTAB")?;
        let strtab = ptr(DT_STRTAB)?.ok_or("no DT_STRTAB")?;
        let strsz = *v.get(&DT_STRSZ).ok_or("no DT_STRSZ")? as usize;
        if !img.readable(strtab, strsz) {
            return Err("string table outside the object".into());
        }
        let gnu_hash = ptr(DT_GNU_HASH)?;
        let sysv_hash = ptr(DT_HASH)?;
        if let Some(ent) = v.get(&DT_RELAENT) {
            if *ent as usize != std::mem::size_of::<Rela>() {
                return Err(format!("DT_RELAENT {ent}"));
            }
        }
        let mut relas = Vec::new();
        for (at, sz) in [(DT_RELA, DT_RELASZ), (DT_JMPREL, DT_PLTRELSZ)] {
            if let (Some(a), Some(&n)) = (ptr(at)?, v.get(&sz)) {
                if n > 0 {
                    if !img.readable(a, n as usize) {
                        return Err("relocation table outside the object".into());
                    }
                    relas.push((a, n as usize));
                }
            }
        }
        let mut d = Dynamic {
            symtab,
            strtab,
            strsz,
            nsyms: 0,
            gnu_hash,
            sysv_hash,
            soname: None,
            relas,
            img,
        };
        d.nsyms = d.count_syms().ok_or("no usable hash table")?;
        if !d.img.readable(symtab, d.nsyms * std::mem::size_of::<Sym>()) {
            return Err("symbol table outside the object".into());
        }
        if let Some(&off) = v.get(&DT_SONAME) {
            d.soname = d.str_at(off as usize).map(|s| s.to_vec());
        }
        Ok(d)
    }

    fn str_at(&self, off: usize) -> Option<&[u8]> {
        if off >= self.strsz {
            return None;
        }
        self.img.cstr(self.strtab + off, self.strsz - off)
    }

    fn sym(&self, i: usize) -> Option<Sym> {
        if i >= self.nsyms {
            return None;
        }
        self.img.read(self.symtab + i * std::mem::size_of::<Sym>())
    }

    /// Number of dynamic symbols, from DT_HASH (nchain) or DT_GNU_HASH (last chain end).
    fn count_syms(&self) -> Option<usize> {
        if let Some(h) = self.sysv_hash {
            let nchain: u32 = self.img.read(h + 4)?;
            return Some(nchain as usize);
        }
        let h = self.gnu_hash?;
        let nbuckets: u32 = self.img.read(h)?;
        let symoffset: u32 = self.img.read(h + 4)?;
        let bloom: u32 = self.img.read(h + 8)?;
        let buckets = h + 16 + bloom as usize * 8;
        let chains = buckets + nbuckets as usize * 4;
        let mut last = 0u32;
        for i in 0..nbuckets as usize {
            last = last.max(self.img.read::<u32>(buckets + i * 4)?);
        }
        if last < symoffset {
            return Some(symoffset as usize);
        }
        let mut i = last;
        loop {
            let c: u32 = self.img.read(chains + (i - symoffset) as usize * 4)?;
            if c & 1 != 0 {
                return Some(i as usize + 1);
            }
            i = i.checked_add(1)?;
        }
    }

    /// True when the object defines (exports) `name`.
    fn defines(&self, name: &[u8]) -> bool {
        if let Some(h) = self.gnu_hash {
            return self.gnu_lookup(h, name).unwrap_or(false);
        }
        if let Some(h) = self.sysv_hash {
            return self.sysv_lookup(h, name).unwrap_or(false);
        }
        false
    }

    fn is_def(&self, i: usize, name: &[u8]) -> bool {
        match self.sym(i) {
            Some(s) => s.shndx != 0 && self.str_at(s.name as usize) == Some(name),
            None => false,
        }
    }

    fn gnu_lookup(&self, h: usize, name: &[u8]) -> Option<bool> {
        let hash = name
            .iter()
            .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32));
        let nbuckets: u32 = self.img.read(h)?;
        let symoffset: u32 = self.img.read(h + 4)?;
        let bloom: u32 = self.img.read(h + 8)?;
        if nbuckets == 0 {
            return Some(false);
        }
        let buckets = h + 16 + bloom as usize * 8;
        let chains = buckets + nbuckets as usize * 4;
        let mut i: u32 = self.img.read(buckets + (hash % nbuckets) as usize * 4)?;
        if i < symoffset {
            return Some(false);
        }
        loop {
            let c: u32 = self.img.read(chains + (i - symoffset) as usize * 4)?;
            if (c | 1) == (hash | 1) && self.is_def(i as usize, name) {
                return Some(true);
            }
            if c & 1 != 0 {
                return Some(false);
            }
            i += 1;
        }
    }

    fn sysv_lookup(&self, h: usize, name: &[u8]) -> Option<bool> {
        let hash = name.iter().fold(0u32, |h, &c| {
            let h = (h << 4).wrapping_add(c as u32);
            let g = h & 0xf000_0000;
            (h ^ (g >> 24)) & !g
        });
        let nbucket: u32 = self.img.read(h)?;
        let nchain: u32 = self.img.read(h + 4)?;
        if nbucket == 0 {
            return Some(false);
        }
        let mut i: u32 = self.img.read(h + 8 + (hash % nbucket) as usize * 4)?;
        let mut steps = 0;
        while i != 0 && i < nchain && steps <= nchain {
            if self.is_def(i as usize, name) {
                return Some(true);
            }
            i = self
                .img
                .read(h + 8 + nbucket as usize * 4 + i as usize * 4)?;
            steps += 1;
        }
        Some(false)
    }
}

// ---------------------------------------------------------------- planning

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// JUMP_SLOT or GLOB_DAT: written by the loader only.
    Got,
    /// An absolute pointer in data: written only while it still holds the loader's value.
    Abs,
}

#[derive(Clone, Copy)]
struct Slot {
    addr: usize,
    hook: usize,
    /// What the loader stores for this name (`dlsym(RTLD_DEFAULT)`), 0 if unknown.
    loader: usize,
    kind: Kind,
}

/// One object ready to be written.
struct Plan {
    base: usize,
    name: CString,
    img: Image,
    slots: Vec<Slot>,
}

/// Why an object is left alone (policy, not failure).
fn excluded(obj: &Object, d: Option<&Dynamic>, self_addr: usize) -> bool {
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
fn is_glibc(soname: &[u8]) -> bool {
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

/// The slots of `d` to write for `hooks` (name -> (hook address, loader's address)).
fn plan_slots(d: &Dynamic, hooks: &HashMap<&[u8], (usize, usize)>) -> Vec<Slot> {
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
            let Some(&(hook, loader)) = hooks.get(name) else {
                continue;
            };
            let addr = d.img.base.wrapping_add(r.offset as usize);
            if addr & 7 != 0 || !d.img.readable(addr, 8) || !seen.insert(addr) {
                continue;
            }
            out.push(Slot {
                addr,
                hook,
                loader,
                kind,
            });
        }
    }
    out
}

// ---------------------------------------------------------------- collection, pinning

fn collect() -> (Vec<Object>, (u64, u64)) {
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
fn counters() -> (u64, u64) {
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
struct Pin(*mut c_void);

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
fn pin(obj: &Object) -> Result<Pin, &'static str> {
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
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
    l_ld: *const c_void,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

/// What the loader stores for `name` in an ordinary object: the first definition in the
/// global scope.
fn loader_value(name: &CStr) -> usize {
    // SAFETY: valid C string; RTLD_DEFAULT is always a valid pseudo-handle.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

// ---------------------------------------------------------------- the binder lock and record

struct State {
    /// The hook set installed by `bind_io_in_process` (the `dlopen` wrapper rebinds it).
    installed: Option<&'static [Hook]>,
    /// Counters after the last pass over `installed`.
    seen: (u64, u64),
    /// Objects a pass over `installed` dealt with (bound or failed): (base, name).
    bound: HashSet<(usize, CString)>,
}

static LOCK: AtomicBool = AtomicBool::new(false);
static STATE: StateCell = StateCell(UnsafeCell::new(None));

struct StateCell(UnsafeCell<Option<Box<State>>>);
// SAFETY: accessed only by the holder of LOCK (see `Guard`).
unsafe impl Sync for StateCell {}

/// Holder of the binder lock. Contention is rare (two binders at once), and the holder makes no
/// blocking call, so waiters just yield.
struct Guard(());

impl Guard {
    fn lock() -> Guard {
        while LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        Guard(())
    }

    fn state(&mut self) -> &mut State {
        // SAFETY: only the lock holder reaches the cell, and `&mut self` makes this the only
        // live reference.
        let s = unsafe { &mut *STATE.0.get() };
        s.get_or_insert_with(|| {
            Box::new(State {
                installed: None,
                seen: (u64::MAX, u64::MAX),
                bound: HashSet::new(),
            })
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        LOCK.store(false, Ordering::Release);
    }
}

/// fork child: the thread that may have held the lock is gone; forget (leak) its state.
extern "C" fn after_fork_child() {
    // SAFETY: in the child only this thread runs; the old state is leaked, never touched again.
    unsafe { std::ptr::write(STATE.0.get(), None) };
    LOCK.store(false, Ordering::Release);
}

fn register_fork_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| crate::real::at_fork_child(after_fork_child));
}

// ---------------------------------------------------------------- writing

/// Stores `slot.hook` into the slots of one object, making read-only pages writable for the
/// store only. Returns (written, already bound) or an error.
fn write_slots(img: &Image, slots: &[Slot], recheck: bool) -> Result<(usize, usize), String> {
    let ps = page_size();
    let mut by_page: Vec<&Slot> = slots.iter().collect();
    by_page.sort_by_key(|s| s.addr);
    let (mut written, mut already) = (0, 0);
    let mut i = 0;
    while i < by_page.len() {
        let page = by_page[i].addr & !(ps - 1);
        let mut j = i;
        while j < by_page.len() && by_page[j].addr & !(ps - 1) == page {
            j += 1;
        }
        let group = &by_page[i..j];
        i = j;
        let wanted = |s: &Slot, cur: usize| -> bool {
            if cur == s.hook || cur == 0 {
                return false;
            }
            if recheck || s.kind == Kind::Abs {
                // Only where the loader's value is back (lazy resolution) / still there.
                return s.loader != 0 && cur == s.loader;
            }
            true
        };
        let load = |s: &Slot| -> usize {
            // SAFETY: s.addr is 8-aligned and inside a mapped segment of a pinned object
            // (checked when planned); an atomic view of a pointer-sized slot.
            unsafe { AtomicUsize::from_ptr(s.addr as *mut usize) }.load(Ordering::Relaxed)
        };
        let todo: Vec<&Slot> = group
            .iter()
            .copied()
            .filter(|s| {
                let cur = load(s);
                if cur == s.hook {
                    already += 1;
                }
                wanted(s, cur)
            })
            .collect();
        if todo.is_empty() {
            continue;
        }
        let prot = img
            .page_prot(page)
            .ok_or_else(|| format!("slot page {page:#x} outside the object"))?;
        let toggle = prot & libc::PROT_WRITE == 0;
        if toggle {
            // SAFETY: `page` is a page of this object's mapped image; adding write permission
            // changes no content.
            let r = unsafe { libc::mprotect(page as *mut c_void, ps, prot | libc::PROT_WRITE) };
            if r != 0 {
                return Err(format!("mprotect: errno {}", crate::real::errno()));
            }
        }
        for s in todo {
            // SAFETY: as in `load`; the page is writable now. The store is atomic, so a
            // concurrent caller jumps through either the old or the new address.
            let a = unsafe { AtomicUsize::from_ptr(s.addr as *mut usize) };
            let cur = a.load(Ordering::Relaxed);
            if wanted(s, cur) {
                a.store(s.hook, Ordering::Release);
                written += 1;
            }
        }
        if toggle {
            // SAFETY: puts back the protection the phdrs give this page.
            let r = unsafe { libc::mprotect(page as *mut c_void, ps, prot) };
            if r != 0 {
                return Err(format!(
                    "mprotect (restore): errno {}",
                    crate::real::errno()
                ));
            }
        }
    }
    Ok((written, already))
}

// ---------------------------------------------------------------- passes

static SELF_ANCHOR: u8 = 0;

/// Binds `hooks` in every loaded object except the excluded ones (see the module docs).
/// Idempotent; prints one stderr line when some object could not be bound.
pub fn bind_all(hooks: &'static [Hook]) -> Report {
    let r = pass(hooks, false);
    warn(&r);
    r
}

fn warn(r: &Report) {
    if let Some(line) = r.warn_line() {
        dftracer_core::sys::eprint_line(&line);
    }
}

fn pass(hooks: &'static [Hook], incremental: bool) -> Report {
    let mut report = Report::default();
    if !arch::SUPPORTED {
        report
            .failed
            .push(("*".into(), "unsupported architecture".into()));
        return report;
    }
    register_fork_handler();
    // The tracer's own I/O (none expected) and dl* calls stay untraced.
    let _busy = crate::enter();
    let (objs, counters) = collect();
    report.objects = objs.len();
    // Snapshot of the record (read under the lock, used outside it).
    let (skip, installed) = {
        let mut g = Guard::lock();
        let st = g.state();
        let installed = st
            .installed
            .map(|h| std::ptr::eq(h, hooks))
            .unwrap_or(false);
        let skip = if incremental && installed && st.seen.1 == counters.1 {
            st.bound.clone()
        } else {
            HashSet::new()
        };
        (skip, installed)
    };
    let table: HashMap<&[u8], (usize, usize)> = hooks
        .iter()
        .map(|h| (h.name.to_bytes(), (h.addr as usize, loader_value(h.name))))
        .collect();
    let self_addr = &SELF_ANCHOR as *const u8 as usize;
    let mut plans = Vec::new();
    let mut pins = Vec::new();
    // Objects this pass dealt with (bound, or failed: not retried nor reported again by the
    // incremental passes of the `dlopen` wrapper; an explicit bind retries them).
    let mut done = Vec::new();
    for obj in &objs {
        if excluded(obj, None, self_addr) {
            report.excluded += 1;
            continue;
        }
        if skip.contains(&(obj.base, obj.name.clone())) {
            report.unchanged += 1;
            continue;
        }
        let pin = match pin(obj) {
            Ok(p) => p,
            Err(why) => {
                report.failed.push((obj.label(), why.into()));
                done.push((obj.base, obj.name.clone()));
                continue;
            }
        };
        let d = match Dynamic::parse(obj) {
            Ok(d) => d,
            Err(why) => {
                report.failed.push((obj.label(), why));
                done.push((obj.base, obj.name.clone()));
                continue;
            }
        };
        if excluded(obj, Some(&d), self_addr) {
            report.excluded += 1;
            done.push((obj.base, obj.name.clone()));
            continue;
        }
        report.scanned += 1;
        let slots = plan_slots(&d, &table);
        pins.push(pin);
        plans.push(Plan {
            base: obj.base,
            name: obj.name.clone(),
            img: d.img,
            slots,
        });
    }
    {
        let mut g = Guard::lock();
        for p in &plans {
            match write_slots(&p.img, &p.slots, false) {
                Ok((w, a)) => {
                    report.slots += w;
                    report.already += a;
                }
                Err(why) => report.failed.push((label(&p.name), why)),
            }
        }
        // Lazy resolutions that raced with the stores above put the loader's value back.
        for p in &plans {
            if let Ok((w, _)) = write_slots(&p.img, &p.slots, true) {
                report.slots += w;
            }
        }
        let st = g.state();
        if installed {
            if !incremental || st.seen.1 != counters.1 {
                st.bound.clear();
            }
            st.bound.extend(done);
            st.bound
                .extend(plans.iter().map(|p| (p.base, p.name.clone())));
            st.seen = counters;
        }
    }
    drop(pins);
    report
}

fn label(name: &CStr) -> String {
    if name.to_bytes().is_empty() {
        "<main>".into()
    } else {
        name.to_string_lossy().into_owned()
    }
}

/// The hooks bound by [`bind_io_in_process`]: [`HOOKS`](crate::hooks::HOOKS) and the `dlopen`
/// wrapper.
///
/// Each hook's address is looked up in this object (`dlsym` on its own handle searches it
/// first) rather than taken from `HOOKS`: this library's own references to its exported names
/// are bound by the loader like anyone's, so with `RTLD_LOCAL` `HOOKS[i].addr` is libc's
/// function (symbol interposition), not ours.
#[cfg(not(test))]
fn io_hooks() -> &'static [Hook] {
    static ALL: std::sync::OnceLock<Vec<Hook>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let me = self_handle();
        let mut v: Vec<Hook> = crate::hooks::HOOKS
            .iter()
            .filter_map(|h| {
                let a = match &me {
                    // SAFETY: a live handle and a C string.
                    Some(p) => unsafe { libc::dlsym(p.0, h.name.as_ptr()) as usize },
                    None => h.addr as usize,
                };
                (a != 0 && crate::real::in_self(a)).then_some(Hook {
                    name: h.name,
                    addr: a as *const (),
                })
            })
            .collect();
        if let Some(h) = dlopen_hook() {
            v.push(h);
        }
        v
    })
}

/// Binds the I/O hooks in every loaded object and installs the `dlopen` wrapper so that objects
/// loaded later are bound too. Idempotent (a repeat call rescans every object, which also
/// repairs slots lost to the lazy-binding race). Does not start tracing.
#[cfg(not(test))]
pub fn bind_io_in_process() -> Report {
    let hooks = io_hooks();
    {
        let mut g = Guard::lock();
        g.state().installed = Some(hooks);
    }
    bind_all(hooks)
}

/// C entry point of [`bind_io_in_process`]: the number of slots written (0 when everything was
/// already bound), or -1 when some object could not be bound (one stderr line says which;
/// the others are bound).
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn dftracer_bind_io() -> c_int {
    let _errno = crate::SavedErrno::new();
    crate::guarded_or(-1, || {
        let r = bind_io_in_process();
        if r.failed.is_empty() {
            r.slots.min(c_int::MAX as usize) as c_int
        } else {
            -1
        }
    })
}

/// The name of hook `i` of [`HOOKS`](crate::hooks::HOOKS) (NULL past the end): lets tests and
/// tools list what binding covers.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn dftracer_bind_hook_name(i: usize) -> *const c_char {
    match crate::hooks::HOOKS.get(i) {
        Some(h) => h.name.as_ptr(),
        None => std::ptr::null(),
    }
}

// ---------------------------------------------------------------- the dlopen wrapper

thread_local! {
    /// Depth of wrapped `dlopen` calls on this thread (constructors may dlopen).
    static DLOPEN_DEPTH: Cell<u32> = const { Cell::new(0) };
}

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;

#[cfg(all(not(test), any(target_arch = "x86_64", target_arch = "aarch64")))]
fn dlopen_hook() -> Option<Hook> {
    Some(Hook {
        name: c"dlopen",
        addr: dlopen_entry as *const (),
    })
}

#[cfg(all(not(test), not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
fn dlopen_hook() -> Option<Hook> {
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
fn rebind_new() {
    let now = counters();
    let installed = {
        let mut g = Guard::lock();
        let st = g.state();
        match st.installed {
            Some(h) if st.seen != now => h,
            _ => return,
        }
    };
    warn(&pass(installed, true));
}

/// `dlopen` as the object containing `ret` would have done it. `None` only if this code
/// panicked before calling `real` (the caller then calls it plainly).
///
/// # Safety
/// `file` is NULL or a C string, as `dlopen` requires.
unsafe fn open_as_caller(
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

enum Target {
    /// Call `dlopen(file, mode)` unchanged.
    Plain,
    /// Call it with this path instead (found in the caller's search list, or `$ORIGIN`
    /// expanded for the caller).
    Path(CString),
    /// Already loaded: this handle (from `RTLD_NOLOAD` with the caller's mode).
    Loaded(*mut c_void),
}

fn target(name: &[u8], mode: c_int, ret: usize) -> Target {
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

fn replace(s: &[u8], pat: &[u8], with: &[u8]) -> Vec<u8> {
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
fn caller_handle(addr: usize) -> Option<Pin> {
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

fn unsafe_zeroed_dl_info() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    }
}

/// A pinned handle of this library.
fn self_handle() -> Option<Pin> {
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
fn info_origin(h: *mut c_void) -> Option<Vec<u8>> {
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
struct SerPath {
    name: *const c_char,
    flags: libc::c_uint,
}

#[repr(C)]
struct SerInfo {
    size: usize,
    cnt: libc::c_uint,
    // followed by `cnt` SerPath
}

/// The library search list glibc uses for a bare-name `dlopen` from the object `h`
/// (`RTLD_DI_SERINFO`), in order.
fn search_list(h: *mut c_void) -> Option<Vec<Vec<u8>>> {
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
fn is_loadable_elf(path: &CStr) -> bool {
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
    fn glibc_names() {
        assert!(is_glibc(b"libc.so.6"));
        assert!(is_glibc(b"ld-linux-x86-64.so.2"));
        assert!(is_glibc(b"libnss_files.so.2"));
        assert!(!is_glibc(b"libz.so.1"));
        assert!(!is_glibc(b"libcrypto.so.3"));
    }

    #[test]
    fn replace_origin() {
        assert_eq!(replace(b"$ORIGIN/x/$ORIGIN", b"$ORIGIN", b"/a"), b"/a/x//a");
    }

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
