//! What `dft_fn.update()` set during a decorated call ([`Updates`]): the log shared by a
//! `dft_fn` and the `_Wrapped` functions it made, read at each call's entry and exit.
#![allow(unsafe_code)] // the thread state's address as a token (SAFETY note)

use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::convert::{py_val, same_key, Collected};

/// Entries an [`Updates`] log keeps at most (one per thread and key; beyond it the oldest
/// goes).
const UPDATES_CAP: usize = 1024;

/// What `dft_fn.update()` set, for the decorated calls of that `dft_fn` in progress on the
/// updating thread: shared by the `dft_fn` (made when it first decorates) and each
/// `_Wrapped` it made.
///
/// A call reads `gen` at its entry and at its exit (two loads). The same value: no update of
/// this `dft_fn` ran meanwhile (on any thread), and the call records as it would without
/// this. Moved: the call's event also gets the entries of its own thread whose generation is
/// past the entry value ([`Updates::since`]), over its captured values.
///
/// One entry per (thread, key), with the generation of its latest update: an earlier update
/// of that key by that thread is no use to anyone (a call in progress that saw both takes the
/// later one; a call that saw only the earlier one has ended and took it; a call that starts
/// later sees neither), so the log holds at most threads x keys entries ([`UPDATES_CAP`]).
/// Threads are told apart by their Python thread state: an address reused by a later thread
/// names only entries older than any call of that thread.
pub(crate) struct Updates {
    /// Bumped once per `update()` that set something; written and read with the GIL held.
    gen: AtomicU64,
    log: std::sync::Mutex<Vec<Update>>,
}

struct Update {
    gen: u64,
    thread: usize,
    key: Py<PyString>,
    value: PyObject,
}

/// The calling thread's token for [`Updates`]: its Python thread state.
fn thread_token(_py: Python<'_>) -> usize {
    // SAFETY: the GIL is held (the token proves it), so this thread has a current thread
    // state; only its address is used.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize }
}

/// Keys equal as text, without running Python code (no `__eq__`): a key that is not valid
/// UTF-8 matches only itself.
fn plain_same_key(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> bool {
    a.is(b) || matches!((a.to_str(), b.to_str()), (Ok(x), Ok(y)) if x == y)
}

impl Updates {
    pub(crate) fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Updates {
            gen: AtomicU64::new(0),
            log: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The generation now (a call's entry and exit value).
    #[inline(always)]
    pub(crate) fn mark(&self) -> u64 {
        self.gen.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Update>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs the values one `update()` set (none is None), as of a new generation.
    pub(crate) fn note(&self, py: Python<'_>, set: Vec<(Bound<'_, PyString>, Bound<'_, PyAny>)>) {
        if set.is_empty() {
            return;
        }
        let me = thread_token(py);
        // Objects replaced are dropped after the lock is released (a `__del__` may update).
        let mut old: Vec<PyObject> = Vec::new();
        {
            let mut log = self.lock();
            let gen = self.gen.load(Ordering::Relaxed) + 1;
            self.gen.store(gen, Ordering::Relaxed);
            for (key, value) in set {
                let found = log
                    .iter_mut()
                    .find(|u| u.thread == me && plain_same_key(u.key.bind(py), &key));
                match found {
                    Some(u) => {
                        u.gen = gen;
                        old.push(std::mem::replace(&mut u.value, value.unbind()));
                    }
                    None => {
                        if log.len() >= UPDATES_CAP {
                            if let Some(i) = (0..log.len()).min_by_key(|&i| log[i].gen) {
                                let u = log.remove(i);
                                old.push(u.key.into_any());
                                old.push(u.value);
                            }
                        }
                        log.push(Update {
                            gen,
                            thread: me,
                            key: key.unbind(),
                            value: value.unbind(),
                        });
                    }
                }
            }
        }
        drop(old);
    }

    /// The calling thread's updates after generation `mark`, in the order their keys were
    /// first set.
    pub(crate) fn since<'py>(
        &self,
        py: Python<'py>,
        mark: u64,
    ) -> Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)> {
        let me = thread_token(py);
        let log = self.lock();
        log.iter()
            .filter(|u| u.thread == me && u.gen > mark)
            .map(|u| (u.key.bind(py).clone(), u.value.bind(py).clone()))
            .collect()
    }

    /// [`Updates::since`] over `vals`: a key already there takes the update's value (it was
    /// set during the call, after the arguments were passed), others are added.
    pub(crate) fn overlay<'py>(&self, py: Python<'py>, mark: u64, vals: &mut Collected<'py>) {
        for (key, value) in self.since(py, mark) {
            let v = py_val(&value);
            match vals.iter_mut().find(|(k, _)| same_key(k, &key)) {
                Some(slot) => slot.1 = v,
                None => {
                    let _ = vals.push((key, v));
                }
            }
        }
    }
}
