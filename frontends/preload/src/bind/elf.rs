//! Reading a loaded object: the `dl_iterate_phdr` view of it ([`Object`]), bounds-checked reads
//! of its mapped memory ([`Image`]) and its parsed dynamic section ([`Dynamic`]: symbols,
//! string table, hash tables, RELA tables, soname).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::c_int;

#[cfg(target_arch = "x86_64")]
pub(super) mod arch {
    pub const JUMP_SLOT: u32 = 7; // R_X86_64_JUMP_SLOT
    pub const GLOB_DAT: u32 = 6; // R_X86_64_GLOB_DAT
    pub const ABS64: u32 = 1; // R_X86_64_64
    pub const EM: u16 = 62; // EM_X86_64
    pub const SUPPORTED: bool = true;
}
#[cfg(target_arch = "aarch64")]
pub(super) mod arch {
    pub const JUMP_SLOT: u32 = 1026; // R_AARCH64_JUMP_SLOT
    pub const GLOB_DAT: u32 = 1025; // R_AARCH64_GLOB_DAT
    pub const ABS64: u32 = 257; // R_AARCH64_ABS64
    pub const EM: u16 = 183; // EM_AARCH64
    pub const SUPPORTED: bool = true;
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) mod arch {
    pub const JUMP_SLOT: u32 = u32::MAX;
    pub const GLOB_DAT: u32 = u32::MAX;
    pub const ABS64: u32 = u32::MAX;
    pub const EM: u16 = 0;
    pub const SUPPORTED: bool = false;
}

pub(super) const PT_LOAD: u32 = 1;
pub(super) const PT_DYNAMIC: u32 = 2;
pub(super) const PT_GNU_RELRO: u32 = 0x6474_e552;
pub(super) const PF_X: u32 = 1;
pub(super) const PF_W: u32 = 2;
pub(super) const PF_R: u32 = 4;

pub(super) const DT_NULL: i64 = 0;
pub(super) const DT_PLTRELSZ: i64 = 2;
pub(super) const DT_HASH: i64 = 4;
pub(super) const DT_STRTAB: i64 = 5;
pub(super) const DT_SYMTAB: i64 = 6;
pub(super) const DT_RELA: i64 = 7;
pub(super) const DT_RELASZ: i64 = 8;
pub(super) const DT_RELAENT: i64 = 9;
pub(super) const DT_STRSZ: i64 = 10;
pub(super) const DT_SONAME: i64 = 14;
pub(super) const DT_REL: i64 = 17;
pub(super) const DT_PLTREL: i64 = 20;
pub(super) const DT_JMPREL: i64 = 23;
pub(super) const DT_GNU_HASH: i64 = 0x6fff_fef5;

pub(super) const AT_PAGESZ: libc::c_ulong = 6;
pub(super) const AT_BASE: libc::c_ulong = 7;
pub(super) const AT_SYSINFO_EHDR: libc::c_ulong = 33;

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Dyn {
    pub(super) tag: i64,
    pub(super) val: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Rela {
    pub(super) offset: u64,
    pub(super) info: u64,
    pub(super) addend: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Sym {
    pub(super) name: u32,
    pub(super) info: u8,
    pub(super) other: u8,
    pub(super) shndx: u16,
    pub(super) value: u64,
    pub(super) size: u64,
}

/// One loaded object as `dl_iterate_phdr` described it.
pub(super) struct Object {
    pub(super) base: usize,
    /// `dlpi_name` (empty for the main program).
    pub(super) name: CString,
    pub(super) phdrs: Vec<libc::Elf64_Phdr>,
}

impl Object {
    pub(super) fn label(&self) -> String {
        if self.name.as_bytes().is_empty() {
            "<main>".into()
        } else {
            self.name.to_string_lossy().into_owned()
        }
    }

    /// The mapped segments: (start, end, p_flags).
    pub(super) fn loads(&self) -> Vec<(usize, usize, u32)> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .filter_map(|p| {
                let s = self.base.checked_add(p.p_vaddr as usize)?;
                Some((s, s.checked_add(p.p_memsz as usize)?, p.p_flags))
            })
            .collect()
    }

    pub(super) fn contains(&self, addr: usize) -> bool {
        self.loads().iter().any(|&(s, e, _)| addr >= s && addr < e)
    }
}

/// Bounds-checked reads of one object's mapped memory.
pub(super) struct Image {
    pub(super) base: usize,
    pub(super) loads: Vec<(usize, usize, u32)>,
    /// The pages ld.so made read-only after relocation (start, end), page-rounded as it does.
    pub(super) relro: Option<(usize, usize)>,
}

impl Image {
    /// True when `addr` lies in one of the object's mapped segments.
    pub(super) fn contains(&self, addr: usize) -> bool {
        self.loads.iter().any(|&(s, e, _)| addr >= s && addr < e)
    }

    pub(super) fn readable(&self, addr: usize, len: usize) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.loads
            .iter()
            .any(|&(s, e, f)| f & PF_R != 0 && addr >= s && end <= e)
    }

    pub(super) fn read<T: Copy>(&self, addr: usize) -> Option<T> {
        if !self.readable(addr, std::mem::size_of::<T>()) {
            return None;
        }
        // SAFETY: [addr, addr + size) lies in a readable PT_LOAD segment of an object pinned
        // for the whole pass; unaligned reads are allowed by read_unaligned.
        Some(unsafe { std::ptr::read_unaligned(addr as *const T) })
    }

    /// A dynamic-section address: glibc relocates most `d_ptr` values in place (adds the base),
    /// but not when the section is read-only; accept both.
    pub(super) fn dyn_ptr(&self, v: u64) -> Option<usize> {
        let v = v as usize;
        if self.readable(v, 1) {
            return Some(v);
        }
        let a = v.checked_add(self.base)?;
        self.readable(a, 1).then_some(a)
    }

    /// The NUL-terminated string at `addr`, at most `max` bytes.
    pub(super) fn cstr(&self, addr: usize, max: usize) -> Option<&[u8]> {
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
    pub(super) fn page_prot(&self, page: usize) -> Option<c_int> {
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

pub(super) fn page_size() -> usize {
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

pub(super) fn auxv(t: libc::c_ulong) -> usize {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(t) as usize }
}

/// The parsed dynamic section of one object.
pub(super) struct Dynamic {
    pub(super) img: Image,
    pub(super) symtab: usize,
    pub(super) strtab: usize,
    pub(super) strsz: usize,
    pub(super) nsyms: usize,
    pub(super) gnu_hash: Option<usize>,
    pub(super) sysv_hash: Option<usize>,
    pub(super) soname: Option<Vec<u8>>,
    /// (address, byte size) of the RELA tables.
    pub(super) relas: Vec<(usize, usize)>,
}

impl Dynamic {
    pub(super) fn parse(obj: &Object) -> Result<Dynamic, String> {
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

    pub(super) fn str_at(&self, off: usize) -> Option<&[u8]> {
        if off >= self.strsz {
            return None;
        }
        self.img.cstr(self.strtab + off, self.strsz - off)
    }

    pub(super) fn sym(&self, i: usize) -> Option<Sym> {
        if i >= self.nsyms {
            return None;
        }
        self.img.read(self.symtab + i * std::mem::size_of::<Sym>())
    }

    /// Number of dynamic symbols, from DT_HASH (nchain) or DT_GNU_HASH (last chain end).
    pub(super) fn count_syms(&self) -> Option<usize> {
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
    pub(super) fn defines(&self, name: &[u8]) -> bool {
        if let Some(h) = self.gnu_hash {
            return self.gnu_lookup(h, name).unwrap_or(false);
        }
        if let Some(h) = self.sysv_hash {
            return self.sysv_lookup(h, name).unwrap_or(false);
        }
        false
    }

    pub(super) fn is_def(&self, i: usize, name: &[u8]) -> bool {
        match self.sym(i) {
            Some(s) => s.shndx != 0 && self.str_at(s.name as usize) == Some(name),
            None => false,
        }
    }

    pub(super) fn gnu_lookup(&self, h: usize, name: &[u8]) -> Option<bool> {
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

    pub(super) fn sysv_lookup(&self, h: usize, name: &[u8]) -> Option<bool> {
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
