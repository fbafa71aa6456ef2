//! The binder lock, and the record it guards (the installed hook set, the objects already
//! bound); reset in a `fork` child.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::collections::HashSet;
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::hooks::HookEntry;

pub(super) struct Record {
    /// The hook set installed by `bind_io_in_process` (the `dlopen` wrapper rebinds it).
    pub(super) installed: Option<&'static [HookEntry]>,
    /// Counters after the last pass over `installed`.
    pub(super) seen: (u64, u64),
    /// Objects a pass over `installed` dealt with (bound or failed): (base, name).
    pub(super) bound: HashSet<(usize, CString)>,
}

pub(super) static LOCK: AtomicBool = AtomicBool::new(false);
pub(super) static RECORD: RecordCell = RecordCell(UnsafeCell::new(None));

pub(super) struct RecordCell(UnsafeCell<Option<Box<Record>>>);
// SAFETY: accessed only by the holder of LOCK (see `Guard`).
unsafe impl Sync for RecordCell {}

/// Holder of the binder lock. Contention is rare (two binders at once), and the holder makes no
/// blocking call, so waiters just yield.
pub(super) struct Guard(());

impl Guard {
    pub(super) fn lock() -> Guard {
        while LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        Guard(())
    }

    pub(super) fn record(&mut self) -> &mut Record {
        // SAFETY: only the lock holder reaches the cell, and `&mut self` makes this the only
        // live reference.
        let s = unsafe { &mut *RECORD.0.get() };
        s.get_or_insert_with(|| {
            Box::new(Record {
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
    unsafe { std::ptr::write(RECORD.0.get(), None) };
    LOCK.store(false, Ordering::Release);
}

pub(super) fn register_fork_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| crate::real::at_fork_child(after_fork_child));
}
