//! Writing the planned slots of one object: aligned atomic stores, read-only pages made
//! writable for the store only (`mprotect`) and put back.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::c_void;

use super::elf::{page_size, Image};
use super::plan::{GotSlot, Kind};

/// Stores `slot.hook` into the slots of one object, making read-only pages writable for the
/// store only. Returns (written, already bound) or an error.
pub(super) fn write_slots(
    img: &Image,
    slots: &[GotSlot],
    recheck: bool,
) -> Result<(usize, usize), String> {
    let ps = page_size();
    let mut by_page: Vec<&GotSlot> = slots.iter().collect();
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
        let wanted = |s: &GotSlot, cur: usize| -> bool {
            if cur == s.hook || cur == 0 {
                return false;
            }
            if s.strict {
                // Another library's definition stays; a lazy stub resolves to `loader`.
                return cur == s.loader || !recheck && s.kind == Kind::Got && img.contains(cur);
            }
            if recheck || s.kind == Kind::Abs {
                // Only where the loader's value is back (lazy resolution) / still there.
                return s.loader != 0 && cur == s.loader;
            }
            true
        };
        let load = |s: &GotSlot| -> usize {
            // SAFETY: s.addr is 8-aligned and inside a mapped segment of a pinned object
            // (checked when planned); an atomic view of a pointer-sized slot.
            unsafe { AtomicUsize::from_ptr(s.addr as *mut usize) }.load(Ordering::Relaxed)
        };
        let todo: Vec<&GotSlot> = group
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
