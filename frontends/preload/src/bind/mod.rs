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
//! function ([`crate::real`](mod@crate::real)).
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
//!
//! # Files
//! - this one: the passes ([`bind_all`], [`bind_io_in_process`]) and their C entry points;
//! - `elf.rs`: a loaded object, bounds-checked reads of its memory, its dynamic section;
//! - `plan.rs`: which objects are left alone, which GOT slots get which hook;
//! - `pin.rs`: collecting the loaded objects and pinning them for a pass;
//! - `lock.rs`: the binder lock and the record it guards;
//! - `slots.rs`: writing the planned slots (`mprotect` around read-only pages);
//! - `dlopen.rs`: the `dlopen` wrapper.
#![allow(unsafe_code)]

mod dlopen;
mod elf;
mod lock;
mod pin;
mod plan;
mod slots;

use std::collections::HashSet;
use std::ffi::{CStr, CString};

#[cfg(not(test))]
use libc::{c_char, c_int};

#[cfg(not(test))]
use dlopen::{dlopen_hook, self_handle};
use elf::{arch, Dynamic};
use lock::{register_fork_handler, Guard};
use pin::{collect, loader_value, pin};
use plan::{excluded, plan_slots, HookTable, Plan};
use slots::write_slots;

use crate::hooks::HookEntry;

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
    /// A scanned object that defines the HDF5 API (`H5Dread`, `H5Fget_name`): a libhdf5.
    pub hdf5: Option<CString>,
    /// A scanned object that defines MPI-IO (`MPI_File_open`, `MPI_Type_size`): an MPI.
    pub mpi: Option<CString>,
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

static SELF_ANCHOR: u8 = 0;

/// Binds `hooks` in every loaded object except the excluded ones (see the module docs).
/// Idempotent; prints one stderr line when some object could not be bound.
pub fn bind_all(hooks: &'static [HookEntry]) -> Report {
    let r = pass(hooks, false);
    warn(&r);
    r
}

fn warn(r: &Report) {
    if let Some(line) = r.warn_line() {
        dftracer_core::frontend::eprint_line(&line);
    }
}

fn pass(hooks: &'static [HookEntry], incremental: bool) -> Report {
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
        let st = g.record();
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
    let table: HookTable = hooks
        .iter()
        .map(|h| {
            let loader = if h.real != 0 {
                h.real
            } else {
                loader_value(h.name)
            };
            (h.name.to_bytes(), (h.addr as usize, loader, h.real != 0))
        })
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
        if report.hdf5.is_none() && d.defines(b"H5Dread") && d.defines(b"H5Fget_name") {
            report.hdf5 = Some(obj.name.clone());
        }
        if report.mpi.is_none() && d.defines(b"MPI_File_open") && d.defines(b"MPI_Type_size") {
            report.mpi = Some(obj.name.clone());
        }
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
        let st = g.record();
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
fn io_hooks() -> &'static [HookEntry] {
    static ALL: std::sync::OnceLock<Vec<HookEntry>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let me = self_handle();
        let mut v: Vec<HookEntry> = crate::hooks::HOOKS
            .iter()
            .filter_map(|h| {
                let a = match &me {
                    // SAFETY: a live handle and a C string.
                    Some(p) => unsafe { libc::dlsym(p.0, h.name.as_ptr()) as usize },
                    None => h.addr as usize,
                };
                (a != 0 && crate::real::in_self(a)).then_some(HookEntry {
                    name: h.name,
                    addr: a as *const (),
                    real: 0,
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
    let base = io_hooks();
    let _ = BASE.set(base);
    let hooks = with_layers(base);
    install(hooks);
    let r = bind_all(hooks);
    after_pass(&r);
    r
}

#[cfg(not(test))]
fn install(hooks: &'static [HookEntry]) {
    let mut g = Guard::lock();
    g.record().installed = Some(hooks);
}

/// Preloaded (or linked), this library's exported hooks need no binding, but the HDF5 and
/// MPI-IO hooks are exported by no one: bind the `dlopen` wrapper (so that a library loaded
/// later, by an `import h5py`, is seen) and, once a libhdf5 or an MPI library is loaded,
/// their hooks, in every object.
#[cfg(not(test))]
pub fn bind_layers_preloaded() {
    static PRELOADED: std::sync::OnceLock<Vec<HookEntry>> = std::sync::OnceLock::new();
    let base: &'static [HookEntry] = PRELOADED.get_or_init(|| dlopen_hook().into_iter().collect());
    let _ = BASE.set(base);
    let hooks = with_layers(base);
    install(hooks);
    let r = bind_all(hooks);
    after_pass(&r);
}

/// The table of this process's mode, without the layers: the I/O hooks and the `dlopen`
/// wrapper (in process), or the wrapper alone (preloaded).
static BASE: std::sync::OnceLock<&'static [HookEntry]> = std::sync::OnceLock::new();
/// The base table plus the hooks of every layer found so far (null: none yet). Each new
/// layer leaks one table (at most two per process).
static TABLE: std::sync::atomic::AtomicPtr<Vec<HookEntry>> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// Per layer (HDF5, MPI-IO): 0 no library seen yet, 1 its hooks are in the table, 2 it
/// cannot be used. Changed only under `LAYERS`.
static LAYERS: std::sync::Mutex<[u8; 2]> = std::sync::Mutex::new([0; 2]);
/// Whether `DFTRACER_DISABLE_HDF5` / `_MPIIO` was set: a library that cannot be bound is
/// said on stderr then (otherwise silently left alone).
pub(crate) static HDF5_EXPLICIT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
pub(crate) static MPIIO_EXPLICIT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `base` plus the layers' hooks found so far.
#[cfg(not(test))]
fn with_layers(base: &'static [HookEntry]) -> &'static [HookEntry] {
    let p = TABLE.load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() {
        base
    } else {
        // SAFETY: a leaked, never-freed Vec published with Release.
        unsafe { &*p }
    }
}

/// After a pass that met a libhdf5 (`r.hdf5`) or an MPI library (`r.mpi`) whose layer is
/// wanted and not bound yet: resolve the layer's functions from that object and, when all
/// are there, bind its hooks everywhere (a full pass: the objects importing them came with
/// the library). Once per layer and process; a library that cannot be used leaves the
/// layer unbound.
#[cfg(not(test))]
fn after_pass(r: &Report) {
    use std::sync::atomic::Ordering;
    /// One layer as this pass found it.
    struct Found<'a> {
        lib: Option<&'a CString>,
        wanted: bool,
        resolve: fn(&CStr) -> Result<(), String>,
        hooks: fn() -> Vec<HookEntry>,
        what: &'static str,
        explicit: bool,
    }
    let found = [
        Found {
            lib: r.hdf5.as_ref(),
            wanted: crate::hdf5_wanted(),
            resolve: crate::hooks::hdf5::resolve,
            hooks: crate::hooks::hdf5::hooks,
            what: "HDF5",
            explicit: HDF5_EXPLICIT.load(Ordering::Relaxed),
        },
        Found {
            lib: r.mpi.as_ref(),
            wanted: crate::mpiio_wanted(),
            resolve: crate::hooks::mpiio::resolve,
            hooks: crate::hooks::mpiio::hooks,
            what: "MPI-IO",
            explicit: MPIIO_EXPLICIT.load(Ordering::Relaxed),
        },
    ];
    if !found.iter().any(|f| f.lib.is_some() && f.wanted) {
        return;
    }
    let Some(&base) = BASE.get() else { return };
    // Never wait long (a fork child of a thread that held it): another thread doing this
    // work is the only one that takes it.
    let mut state = None;
    for _ in 0..10_000 {
        if let Ok(g) = LAYERS.try_lock() {
            state = Some(g);
            break;
        }
        std::thread::yield_now();
    }
    let Some(mut state) = state else { return };
    let busy = crate::enter();
    let mut added = false;
    for (i, f) in found.iter().enumerate() {
        let Some(lib) = f.lib else { continue };
        if !f.wanted || state[i] != 0 {
            continue;
        }
        match (f.resolve)(lib) {
            Ok(()) => {
                state[i] = 1;
                added = true;
            }
            Err(why) => {
                state[i] = 2;
                if f.explicit {
                    dftracer_core::frontend::eprint_line(&format!(
                        "[DFTRACER WARN] {}: {} cannot be traced ({why}); its calls are not recorded",
                        f.what,
                        lib.to_string_lossy()
                    ));
                }
            }
        }
    }
    if !added {
        return;
    }
    let mut v = base.to_vec();
    for (i, f) in found.iter().enumerate() {
        if state[i] == 1 {
            v.extend((f.hooks)());
        }
    }
    let table: &'static Vec<HookEntry> = Box::leak(Box::new(v));
    TABLE.store(table as *const _ as *mut _, Ordering::Release);
    drop(state);
    install(table);
    drop(busy);
    warn(&pass(table, false));
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
