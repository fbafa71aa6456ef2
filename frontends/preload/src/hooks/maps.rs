//! Mappings made by a traced `mmap` (the `mmap` hooks are in `posix.rs`): `msync` and
//! `munmap` on them name the file.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, size_t};

use dftracer_core::{Layer, Schema, Slot};

use super::{missing, out_of_line};
use crate::table::Interned;
use crate::{enter, guarded, ticks, posix_on, real, record_static, SavedErrno};

/// Mappings made by a traced `mmap`, so that `msync` and `munmap` on them can name the file
/// (the fd may be closed by then). A fixed lock-free array: a mapping is claimed by a CAS on
/// its address, its file published last; when full, further mappings are not followed.
const MAPS: usize = 256;

struct Map {
    addr: AtomicUsize,
    len: AtomicUsize,
    /// The mapped file, a parked pin (`table::park`); 0: none.
    file: AtomicU64,
}

static MAPPED: [Map; MAPS] = [const {
    Map {
        addr: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        file: AtomicU64::new(0),
    }
}; MAPS];
/// Traced mappings alive now: 0 lets `munmap`/`msync` forward after one load.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Remembers a traced mapping (called by the `mmap` hooks after a successful traced call).
pub(crate) fn map_insert(addr: usize, len: usize, file: Interned) {
    if addr == 0 || len == 0 {
        return;
    }
    let Some(pin) = file.file.pin() else { return };
    for m in &MAPPED {
        if m.addr
            .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            m.len.store(len, Ordering::Release);
            m.file.store(crate::table::park(pin), Ordering::Release);
            LIVE.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// The first traced mapping overlapping `[addr, addr + len)`: its slot and file.
fn map_find(addr: usize, len: usize) -> Option<(&'static Map, Interned)> {
    let end = addr.saturating_add(len.max(1));
    for m in &MAPPED {
        let a = m.addr.load(Ordering::Acquire);
        if a == 0 {
            continue;
        }
        let f = m.file.load(Ordering::Acquire);
        let l = m.len.load(Ordering::Acquire);
        if f == 0 || a >= end || a.saturating_add(l) <= addr {
            continue;
        }
        let Some(file) = crate::table::peek(f) else {
            continue;
        };
        return Some((m, file));
    }
    None
}

#[inline(always)]
fn maps_live() -> bool {
    LIVE.load(Ordering::Relaxed) != 0 && posix_on()
}

#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    let Some(real) = real!(munmap: unsafe extern "C" fn(*mut c_void, size_t) -> c_int) else {
        return missing(-1);
    };
    if !maps_live() {
        return real(addr, len);
    }
    out_of_line(move || {
        let Some((slot, file)) = map_find(addr as usize, len) else {
            return real(addr, len);
        };
        let Some(busy) = enter() else {
            return real(addr, len);
        };
        // Forget the mapping before it goes (its address may be reused at once) when the
        // call covers all of it.
        let (a, l) = (
            slot.addr.load(Ordering::Acquire),
            slot.len.load(Ordering::Acquire),
        );
        let whole = addr as usize <= a && (addr as usize).saturating_add(len) >= a + l;
        // The mapping's pin, released once its last event is recorded.
        let mut parked = 0;
        if whole {
            parked = slot.file.swap(0, Ordering::AcqRel);
            if parked != 0 {
                slot.len.store(0, Ordering::Release);
                slot.addr.store(0, Ordering::Release);
                LIVE.fetch_sub(1, Ordering::Relaxed);
            }
        }
        static MUNMAP: Schema = Schema::new(
            Layer::LibcIo,
            "munmap",
            "POSIX",
            &[("length", Slot::UInt), ("ret", Slot::Int)],
            "fhash",
        );
        let t0 = ticks();
        let ret = real(addr, len);
        let _errno = SavedErrno::new();
        let t1 = crate::ticks_after(t0);
        guarded(|| {
            record_static(
                &MUNMAP,
                t0,
                t1,
                &[len as u64, ret as i64 as u64],
                &file.file,
            )
        });
        drop(crate::table::unpark(parked));
        drop(busy);
        ret
    })
}

#[no_mangle]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    let Some(real) = real!(msync: unsafe extern "C" fn(*mut c_void, size_t, c_int) -> c_int) else {
        return missing(-1);
    };
    if !maps_live() {
        return real(addr, len, flags);
    }
    out_of_line(move || {
        let Some((_, file)) = map_find(addr as usize, len) else {
            return real(addr, len, flags);
        };
        let Some(busy) = enter() else {
            return real(addr, len, flags);
        };
        static MSYNC: Schema = Schema::new(
            Layer::LibcIo,
            "msync",
            "POSIX",
            &[
                ("length", Slot::UInt),
                ("flags", Slot::Int),
                ("ret", Slot::Int),
            ],
            "fhash",
        );
        let t0 = ticks();
        let ret = real(addr, len, flags);
        let _errno = SavedErrno::new();
        let t1 = crate::ticks_after(t0);
        guarded(|| {
            record_static(
                &MSYNC,
                t0,
                t1,
                &[len as u64, flags as i64 as u64, ret as i64 as u64],
                &file.file,
            )
        });
        drop(busy);
        ret
    })
}
