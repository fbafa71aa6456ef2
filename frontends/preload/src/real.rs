//! The next definition of each interposed symbol, resolved once with `dlsym(RTLD_NEXT)`.
//!
//! [`real!`](crate::real!) keeps one `AtomicUsize` per symbol: a relaxed load on every call, a
//! `dlsym` only the first time (two racing threads may both resolve; they store the same
//! value). `dlsym` may allocate (`calloc` for its error state); that is safe here because
//! this library does not interpose the allocator.
//!
//! Which definition is "next" depends on how this library was loaded (glibc 2.36, checked by
//! `tests/bind.rs`, test `real_functions_are_libc_or_the_next_interposer`):
//! - **preloaded or linked** (`LD_PRELOAD`, or a `DT_NEEDED` of the program: loaded before
//!   libc, part of the global scope): the program's calls reach this library through the
//!   normal symbol order, and `RTLD_NEXT` is the next definition after it (an interposer
//!   preloaded after it, else libc) — the chain is kept.
//! - **`dlopen`ed** (binding mode, [`crate::bind`]; `RTLD_LOCAL` or `RTLD_GLOBAL`, loaded after
//!   libc): `RTLD_NEXT` searches this library's *own* dependency list and returns libc's
//!   function, skipping an interposer preloaded by the user. Binding rewrites the program's
//!   slots, which held the global scope's first definition; that is what the hooks must call,
//!   so it is looked up in the global scope (`dlsym` on `dlopen(NULL)`'s handle).
//!
//! Either way, an answer inside this library (which would recurse forever) or no answer falls
//! back to `RTLD_NEXT`, then to libc's own definition (`dlopen("libc.so.6", RTLD_NOLOAD)`).
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Resolves the definition of `name` (NUL-terminated) that this library's hook forwards to;
/// 0 when absent. Never an address inside this library.
#[cold]
pub fn resolve(name: &CStr) -> usize {
    let ok = |p: usize| p != 0 && !in_self(p);
    if !loaded_before_libc() {
        if let Some(g) = handle(&GLOBAL, None) {
            // SAFETY: a live handle (the main program's) and a valid C string.
            let p = unsafe { libc::dlsym(g, name.as_ptr()) as usize };
            if ok(p) {
                return p;
            }
        }
    }
    // SAFETY: `name` is a valid C string; RTLD_NEXT is valid from a shared object.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize };
    if ok(p) {
        return p;
    }
    let Some(h) = handle(&LIBC, Some(c"libc.so.6")) else {
        return 0;
    };
    // SAFETY: a live handle (libc is never unloaded) and a valid C string.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) as usize };
    if ok(p) {
        p
    } else {
        0
    }
}

static GLOBAL: AtomicUsize = AtomicUsize::new(0);
static LIBC: AtomicUsize = AtomicUsize::new(0);

/// A cached handle: `dlopen(NULL)` (the global scope) or `name` with RTLD_NOLOAD. Never
/// closed (both stay loaded for the life of the process).
fn handle(cache: &AtomicUsize, name: Option<&CStr>) -> Option<*mut libc::c_void> {
    let h = cache.load(Ordering::Relaxed);
    if h != 0 {
        return Some(h as *mut libc::c_void);
    }
    let h = match name {
        // SAFETY: dlopen(NULL) returns the main program's handle.
        None => unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_LAZY) },
        // SAFETY: a valid C string; NOLOAD only returns an object already loaded.
        Some(n) => unsafe { libc::dlopen(n.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) },
    };
    cache.store(h as usize, Ordering::Relaxed);
    (!h.is_null()).then_some(h)
}

/// True when this library was loaded before libc (preloaded, or a dependency of the program),
/// false when it was `dlopen`ed later: the link-map list is in load order.
pub(crate) fn loaded_before_libc() -> bool {
    loaded_before_libc_known().unwrap_or(true)
}

/// [`loaded_before_libc`] as found in the link map; `None` when the link map could not be
/// read (that function then assumes a preload). Where a wrong yes would be unsound (the
/// static TLS offsets of `lib.rs`'s constructor), only `Some(true)` counts.
pub(crate) fn loaded_before_libc_known() -> Option<bool> {
    static V: AtomicU8 = AtomicU8::new(0);
    match V.load(Ordering::Relaxed) {
        1 => return Some(true),
        2 => return Some(false),
        3 => return None,
        _ => {}
    }
    let v = compute_loaded_before_libc();
    V.store(
        match v {
            Some(true) => 1,
            Some(false) => 2,
            None => 3,
        },
        Ordering::Relaxed,
    );
    v
}

/// The public head of glibc's `struct link_map`.
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const libc::c_char,
    l_ld: *const libc::c_void,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

fn link_map_of(addr: usize) -> *const LinkMap {
    let mut info = dl_info();
    let mut lm: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 fills `info` and, with RTLD_DL_LINKMAP (2), one link_map pointer.
    let r = unsafe { libc::dladdr1(addr as *const libc::c_void, &mut info, &mut lm, 2) };
    if r == 0 {
        std::ptr::null()
    } else {
        lm as *const LinkMap
    }
}

fn compute_loaded_before_libc() -> Option<bool> {
    static ANCHOR: u8 = 0;
    let me = link_map_of(&ANCHOR as *const u8 as usize);
    let mut libc_lm: *mut libc::c_void = std::ptr::null_mut();
    let h = handle(&LIBC, Some(c"libc.so.6"))?;
    // SAFETY: a live handle; RTLD_DI_LINKMAP writes one pointer.
    let r = unsafe {
        libc::dlinfo(
            h,
            libc::RTLD_DI_LINKMAP,
            &mut libc_lm as *mut _ as *mut libc::c_void,
        )
    };
    let libc_lm = libc_lm as *const LinkMap;
    if r != 0 || me.is_null() || libc_lm.is_null() {
        return None;
    }
    // The base namespace only: in one of `dlmopen`'s, this library may come first with its
    // own libc after it although the program had long started.
    let mut lmid: libc::c_long = -1;
    // SAFETY: a glibc link map is a valid handle; RTLD_DI_LMID writes one Lmid_t (long).
    let r = unsafe {
        libc::dlinfo(
            me as *mut libc::c_void,
            libc::RTLD_DI_LMID,
            &mut lmid as *mut libc::c_long as *mut libc::c_void,
        )
    };
    if r != 0 || lmid != libc::LM_ID_BASE {
        return None;
    }
    let mut p = me;
    while !p.is_null() {
        if std::ptr::eq(p, libc_lm) {
            return Some(false);
        }
        // SAFETY: link maps of loaded objects; the list is only changed under the loader's
        // lock, and these objects (this library, libc) are never unloaded while we walk.
        p = unsafe { (*p).l_prev };
    }
    Some(true)
}

/// True when this library was loaded under the name `libdftracer_preload*` (its link-map
/// name, as the loader found it), the reference's name of the library whose constructor
/// starts tracing; `libdftracer_core*` (what the Python module and `-ldftracer_core` load)
/// is the reference's core, which starts nothing by itself.
pub(crate) fn loaded_as_preload() -> bool {
    static ANCHOR: u8 = 0;
    let lm = link_map_of(&ANCHOR as *const u8 as usize);
    if lm.is_null() {
        return false;
    }
    // SAFETY: a live link map of this loaded object; l_name is NULL or a C string owned by
    // the loader for as long as the object is loaded.
    let name = unsafe { (*lm).l_name };
    if name.is_null() {
        return false;
    }
    // SAFETY: as above.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let base = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    base.starts_with(b"libdftracer_preload")
}

fn dl_info() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    }
}

/// True when `addr` lies in this library: inside the span of its loaded segments, found once
/// (`dl_iterate_phdr`). Two `dladdr` calls per resolved symbol had cost ~24,000 instructions
/// each (a scan of this library's symbols): 2 million, 0.7 ms, in every traced process.
pub fn in_self(addr: usize) -> bool {
    let (mut lo, mut hi) = (
        SELF_LO.load(Ordering::Relaxed),
        SELF_HI.load(Ordering::Relaxed),
    );
    if hi == 0 {
        match self_span() {
            Some((l, h)) => {
                (lo, hi) = (l, h);
                SELF_LO.store(l, Ordering::Relaxed);
                SELF_HI.store(h, Ordering::Relaxed);
            }
            None => return in_self_by_dladdr(addr),
        }
    }
    (lo..hi).contains(&addr)
}

static SELF_LO: AtomicUsize = AtomicUsize::new(0);
static SELF_HI: AtomicUsize = AtomicUsize::new(0);
static ANCHOR: u8 = 0;

/// `[lowest, highest)` address of this library's `PT_LOAD` segments (the loader reserves the
/// whole span for the object: nothing else is mapped inside it).
fn self_span() -> Option<(usize, usize)> {
    span_of(&ANCHOR as *const u8 as usize)
}

/// `[lowest, highest)` address of the `PT_LOAD` segments of the loaded object holding
/// `anchor`, if one does.
pub fn span_of(anchor: usize) -> Option<(usize, usize)> {
    struct Find {
        anchor: usize,
        span: Option<(usize, usize)>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Find` passed below; `info` and its program headers are the
        // loader's, valid during the callback.
        let (f, info) = unsafe { (&mut *(data as *mut Find), &*info) };
        let (mut lo, mut hi) = (usize::MAX, 0);
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` holds `dlpi_phnum` headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                lo = lo.min(start);
                hi = hi.max(start.wrapping_add(ph.p_memsz as usize));
            }
        }
        if (lo..hi).contains(&f.anchor) {
            f.span = Some((lo, hi));
            1
        } else {
            0
        }
    }
    let mut f = Find { anchor, span: None };
    // SAFETY: `each` is a valid callback and `f` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut f as *mut Find as *mut libc::c_void) };
    f.span
}

/// [`in_self`] where the segments were not found: the object `dladdr` names for `addr` is
/// this library's.
fn in_self_by_dladdr(addr: usize) -> bool {
    let base = |a: usize| -> usize {
        let mut info = dl_info();
        // SAFETY: dladdr only reads its address argument and fills `info`.
        if unsafe { libc::dladdr(a as *const libc::c_void, &mut info) } == 0 {
            0
        } else {
            info.dli_fbase as usize
        }
    };
    let mine = base(&ANCHOR as *const u8 as usize);
    mine != 0 && base(addr) == mine
}

/// Loads a cached symbol address, resolving it on first use.
#[inline(always)]
pub fn cached(slot: &AtomicUsize, name: &CStr) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = resolve(name);
    slot.store(p, Ordering::Relaxed);
    p
}

/// `real!(name: fn-type)` evaluates to `Option<fn-type>`: the next `name` after this library.
#[macro_export]
macro_rules! real {
    ($name:ident : $ty:ty) => {{
        static ADDR: ::std::sync::atomic::AtomicUsize = ::std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::real::cached(
            &ADDR,
            // SAFETY: the literal ends with exactly one NUL.
            unsafe {
                ::std::ffi::CStr::from_bytes_with_nul_unchecked(
                    concat!(stringify!($name), "\0").as_bytes(),
                )
            },
        );
        if p == 0 {
            None
        } else {
            // SAFETY: `p` is the address of the C function `name`, whose C signature is `$ty`.
            Some(unsafe { ::std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

/// Where `errno` lies relative to the thread pointer (0: not measured yet). libc reaches its
/// own `errno` through the initial-exec TLS model, so its TLS block is static and `errno` is
/// at one offset from every thread's pointer: measured once ([`measure_errno`]), the slot
/// is two instructions instead of a call to `__errno_location` (every hook saves and
/// restores `errno` around its recording).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
static ERRNO_OFFSET: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use dftracer_core::frontend::thread_pointer;

/// Measures [`ERRNO_OFFSET`] (once, at load).
pub fn measure_errno() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // SAFETY: __errno_location returns this thread's errno slot.
        let slot = unsafe { libc::__errno_location() } as isize;
        let off = slot.wrapping_sub(thread_pointer() as isize);
        ERRNO_OFFSET.store(off, Ordering::Relaxed);
    }
}

/// This thread's `errno` slot.
#[inline(always)]
fn errno_slot() -> *mut libc::c_int {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let off = ERRNO_OFFSET.load(Ordering::Relaxed);
        if off != 0 {
            return thread_pointer().wrapping_add_signed(off) as *mut libc::c_int;
        }
    }
    // SAFETY: __errno_location has no preconditions.
    unsafe { libc::__errno_location() }
}

/// This thread's `errno`.
#[inline(always)]
pub fn errno() -> i32 {
    // SAFETY: this thread's errno slot, always valid.
    unsafe { *errno_slot() }
}

/// Sets `errno`.
#[inline(always)]
pub fn set_errno(v: i32) {
    // SAFETY: this thread's errno slot.
    unsafe { *errno_slot() = v };
}

pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Registers `f` to run in the child after `fork`.
pub fn at_fork_child(f: extern "C" fn()) {
    // SAFETY: registering a plain function pointer; handlers live for the whole process.
    unsafe {
        let f: unsafe extern "C" fn() = f;
        libc::pthread_atfork(None, None, Some(f));
    }
}

/// The next definition of `sigaction`, for the core's signal handling
/// (`dftracer_core::signals`): the tracer changes dispositions with it, never through its own
/// hook.
pub fn sigaction() -> Option<dftracer_core::frontend::signals::SigactionFn> {
    real!(sigaction: dftracer_core::frontend::signals::SigactionFn)
}
