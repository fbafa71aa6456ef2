//! Binding without `LD_PRELOAD` (`src/bind/`): C programs compiled here `dlopen` the library
//! with `RTLD_LOCAL` (as the Python extension or ctypes would), the constructor starts the core
//! from `DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD` as it does today, and the program calls the
//! exported `dftracer_bind_io()`. The real trace files are read back.
#![cfg(target_arch = "x86_64")]

mod common;
use common::*;

use std::collections::BTreeMap;
use std::process::Command;

/// A command with tracing configured but **no** `LD_PRELOAD`; `DFT_LIB` names the library.
fn bind_cmd(s: &Scratch, exe: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = s.cmd(exe, Some(&s.s("data")));
    c.env_remove("LD_PRELOAD").env("DFT_LIB", lib());
    c
}

/// The same program with nothing loaded and no tracing (`DFT_NOBIND=1`).
fn plain_cmd(s: &Scratch, exe: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(exe);
    c.current_dir(&s.dir)
        .env("DFT_NOBIND", "1")
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_ENABLE");
    c
}

/// Event name -> count, for events on files under `dir`.
fn counts(t: &Trace, dir: &str) -> BTreeMap<String, usize> {
    let files = t.files();
    let mut m = BTreeMap::new();
    for e in t.io() {
        let h = e["args"]["fhash"].as_str().expect("fhash");
        if files[h].starts_with(dir) {
            *m.entry(e["name"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    m
}

fn map(v: &[(&str, usize)]) -> BTreeMap<String, usize> {
    v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

const BIND: &str = r#"
#include <dlfcn.h>
#include <time.h>
static void *dft;
static double now_ms(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
/* Loads the tracer like an API frontend would (RTLD_LOCAL) and binds; returns the slot count. */
static int bind_io(void) {
    if (getenv("DFT_NOBIND")) return 0;
    if (!dft) { dft = dlopen(getenv("DFT_LIB"), RTLD_NOW | RTLD_LOCAL); CHECK(dft); }
    int (*b)(void) = (int (*)(void))dlsym(dft, "dftracer_bind_io"); CHECK(b);
    int n = b();
    CHECK(n >= 0);
    return n;
}
#define R(name, expr) do { errno = 0; long v_ = (long)(expr); int e_ = errno; \
    printf("%s=%ld errno=%d\n", name, v_, e_); } while (0)
"#;

fn bprog(body: &str) -> String {
    prog(&format!("{BIND}\n{body}"))
}

// ---------------------------------------------------------------- 1. the program's own calls

const CALLS: &str = r#"
int main(int argc, char **argv) {
    const char *d = argv[1];
    int n = bind_io();
    fprintf(stderr, "bound %d\n", n);
    char f[512], g[512], buf[4096];
    memset(buf, 'x', sizeof buf);
    snprintf(f, sizeof f, "%s/a.bin", d);
    snprintf(g, sizeof g, "%s/missing.bin", d);
    int fd = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0644); R("open", fd >= 0);
    R("write", write(fd, buf, 1000));
    R("close", close(fd));
    fd = open(f, O_RDONLY); R("open", fd >= 0);
    R("read", read(fd, buf, 100));
    R("pread", pread(fd, buf, 50, 990));
    R("read_badfd", read(-1, buf, 1));
    R("close", close(fd));
    R("open_missing", open(g, O_RDONLY));
    struct stat st;
    R("stat", stat(f, &st)); R("size", st.st_size);
    R("stat_missing", stat(g, &st));
    FILE *F = fopen(f, "r"); R("fopen", F != NULL);
    R("fread", fread(buf, 1, 2000, F));
    R("fclose", fclose(F));
    R("fopen_missing", fopen(g, "r") != NULL);
    /* a second bind changes nothing */
    R("rebind", bind_io());
    return 0;
}
"#;

fn calls_expect() -> BTreeMap<String, usize> {
    map(&[
        ("open", 3),
        ("write", 1),
        ("read", 1),
        ("pread", 1),
        ("close", 2),
        ("stat", 2),
        ("fopen", 2),
        ("fread", 1),
        ("fclose", 1),
    ])
}

fn check_calls(s: &Scratch, exe: &std::path::Path) {
    let plain = ok(plain_cmd(s, exe).arg(s.s("data")).output().unwrap());
    let out = bind_cmd(s, exe).arg(s.s("data")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let traced = ok(out);
    // Same return values and errno with and without binding (the rebind line: 0 slots).
    assert_eq!(traced, plain, "stderr: {stderr}");
    assert!(traced.contains("read_badfd=-1 errno=9"), "{traced}");
    assert!(traced.contains("open_missing=-1 errno=2"), "{traced}");
    assert!(traced.contains("rebind=0 errno=0"), "{traced}");
    let bound: i64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bound "))
        .expect("bound line")
        .parse()
        .unwrap();
    // The library's start already bound the process (it was loaded with dlopen and asked to
    // trace I/O); the program's own call finds everything bound.
    assert!(bound >= 0, "slots bound: {bound}");
    assert!(!stderr.contains("DFTRACER WARN"), "{stderr}");
    let t = s.only_trace();
    // Exact: libc's internal open under fopen is not a second (POSIX) event.
    assert_eq!(counts(&t, &s.s("data")), calls_expect());
    let ev = t.io();
    let pread = ev.iter().find(|e| e["name"] == "pread").unwrap();
    assert_eq!(pread["args"]["count"], 50);
    assert_eq!(pread["args"]["ret"], 10);
    std::fs::remove_file(&t.path).unwrap();
}

#[test]
fn program_calls_are_traced_with_exact_counts_and_unchanged_results() {
    let s = Scratch::new("bind-calls");
    let exe = s.compile_with("calls", &bprog(CALLS), &["-ldl"]);
    check_calls(&s, &exe);
}

#[test]
fn full_relro_and_no_plt_programs_are_traced() {
    let s = Scratch::new("bind-relro");
    for (name, flags) in [
        ("now", &["-Wl,-z,relro,-z,now", "-ldl"][..]),
        ("noplt", &["-fno-plt", "-Wl,-z,relro,-z,now", "-ldl"][..]),
        ("lazy", &["-Wl,-z,lazy", "-Wl,-z,norelro", "-ldl"][..]),
        ("nopie", &["-no-pie", "-ldl"][..]),
    ] {
        // -fno-plt must come before the source to apply; gcc accepts it after too.
        let exe = s.compile_with(name, &bprog(CALLS), flags);
        check_calls(&s, &exe);
    }
}

// ---------------------------------------------------------------- 2, 3. libraries

const READER_LIB: &str = r#"
int reader(const char *path) {
    char buf[256];
    int fd = open(path, O_RDONLY); CHECK(fd >= 0);
    CHECK(read(fd, buf, 10) == 10);
    CHECK(close(fd) == 0);
    FILE *F = fopen(path, "r"); CHECK(F);
    CHECK(fgets(buf, 5, F) != NULL);
    CHECK(fclose(F) == 0);
    return 0;
}
"#;

const LIBS_MAIN: &str = r#"
int needed_io(const char *path);
int main(int argc, char **argv) {
    const char *d = argv[1];
    char f[512];
    snprintf(f, sizeof f, "%s/in.txt", d);
    FILE *w = fopen(f, "w"); CHECK(w); fputs("0123456789abcdef\n", w); fclose(w);
    bind_io();
    /* 3. linked before binding (DT_NEEDED) */
    CHECK(needed_io(f) == 0);
    /* 2. loaded after binding, by full path */
    void *h = dlopen(argv[2], RTLD_NOW); CHECK(h);
    CHECK(dlerror() == NULL);
    int (*r)(const char *) = (int (*)(const char *))dlsym(h, "reader"); CHECK(r);
    CHECK(r(f) == 0);
    /* by bare name, found through this program's RUNPATH ($ORIGIN/rp): the wrapper must
       search as the program, not as the tracer library */
    void *h2 = dlopen("libbare.so", RTLD_NOW);
    if (!h2) { fprintf(stderr, "bare dlopen failed: %s\n", dlerror()); exit(91); }
    int (*r2)(const char *) = (int (*)(const char *))dlsym(h2, "reader"); CHECK(r2);
    CHECK(r2(f) == 0);
    /* a failing dlopen fails the same way */
    CHECK(dlopen("libnot-there-at-all.so", RTLD_NOW) == NULL);
    const char *e = dlerror(); CHECK(e && strstr(e, "libnot-there-at-all.so"));
    /* $ORIGIN in a path is the program's directory */
    void *h3 = dlopen("$ORIGIN/rp/libbare.so", RTLD_NOW); CHECK(h3 == h2);
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn libraries_linked_before_and_loaded_after_binding_are_traced() {
    let s = Scratch::new("bind-libs");
    let so = |name: &str| -> std::path::PathBuf {
        s.compile_with(name, &prog(READER_LIB), &["-shared", "-fPIC"])
    };
    let reader = so("libreader.so");
    std::fs::create_dir_all(s.path("rp")).unwrap();
    s.compile_with("rp/libbare.so", &prog(READER_LIB), &["-shared", "-fPIC"]);
    s.compile_with(
        "libneeded.so",
        &prog(&READER_LIB.replace("int reader(", "int needed_io(")),
        &["-shared", "-fPIC"],
    );
    let dir = s.dir.to_string_lossy().into_owned();
    let exe = s.compile_with(
        "libs",
        &bprog(LIBS_MAIN),
        &[
            &format!("-L{dir}"),
            "-lneeded",
            &format!("-Wl,-rpath,{dir}"),
            "-Wl,-rpath,$ORIGIN/rp",
            "-Wl,--enable-new-dtags",
            "-ldl",
        ],
    );
    let out = bind_cmd(&s, &exe)
        .args([s.s("data"), reader.to_string_lossy().into_owned()])
        .output()
        .unwrap();
    assert_eq!(ok(out), "ok\n");
    let t = s.only_trace();
    // Three libraries each: open, read, close, fopen, fgets, fclose (the program's own
    // fopen/fputs/fclose of the input happened before binding).
    assert_eq!(
        counts(&t, &s.s("data")),
        map(&[
            ("open", 3),
            ("read", 3),
            ("close", 3),
            ("fopen", 3),
            ("fgets", 3),
            ("fclose", 3)
        ])
    );
}

// ---------------------------------------------------------------- RTLD_NEXT

const NEXT: &str = r#"
int main(int argc, char **argv) {
    char f[512], buf[64];
    snprintf(f, sizeof f, "%s/n.txt", argv[1]);
    int w = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0644); CHECK(w >= 0);
    CHECK(write(w, "hello world", 11) == 11); close(w);
    /* call the tracer's own `open`/`read` hooks directly, without any binding: their real
       functions must be libc's (a hook resolving to itself would recurse forever) */
    void *h = dlopen(getenv("DFT_LIB"), RTLD_NOW | RTLD_LOCAL); CHECK(h);
    int (*o)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(h, "open");
    ssize_t (*r)(int, void *, size_t) = (ssize_t (*)(int, void *, size_t))dlsym(h, "read");
    CHECK(o && r && (void *)r != dlsym(RTLD_DEFAULT, "read"));
    int fd = o(f, O_RDONLY); CHECK(fd >= 0);
    CHECK(r(fd, buf, 5) == 5 && !memcmp(buf, "hello", 5));
    errno = 0; CHECK(r(-1, buf, 1) == -1 && errno == EBADF);
    /* with binding, a preloaded interposer stays between the program and libc */
    bind_io();
    CHECK(read(fd, buf, 3) == 3);
    int (*seen)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "counter_reads");
    printf("counter %d\n", seen ? seen() : -1);
    return 0;
}
"#;

const COUNTER: &str = r#"
#include <dlfcn.h>
static int n;
int counter_reads(void) { return n; }
ssize_t read(int fd, void *b, size_t c) {
    static ssize_t (*next)(int, void *, size_t);
    if (!next) next = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (c == 3) n++;   /* the program's read after binding; not the tracer's own reads */
    return next(fd, b, c);
}
"#;

#[test]
fn real_functions_are_libc_or_the_next_interposer() {
    let s = Scratch::new("bind-next");
    let exe = s.compile_with("next", &bprog(NEXT), &["-ldl"]);
    let counter = s.compile_with(
        "libcounter.so",
        &prog(COUNTER),
        &["-shared", "-fPIC", "-ldl"],
    );
    // dlopen'ed RTLD_LOCAL: RTLD_NEXT from the library finds libc.
    let out = ok(bind_cmd(&s, &exe).arg(s.s("data")).output().unwrap());
    assert_eq!(out, "counter -1\n");
    let t = s.only_trace();
    assert_eq!(
        counts(&t, &s.s("data")),
        map(&[("open", 1), ("read", 2)]),
        "hooks called directly record, then binding records the program's read"
    );
    std::fs::remove_file(&t.path).unwrap();
    // Another interposer preloaded: our bound hook forwards to it (1 read through it), not
    // around it to libc.
    let out = ok(bind_cmd(&s, &exe)
        .arg(s.s("data"))
        .env("LD_PRELOAD", &counter)
        .output()
        .unwrap());
    assert_eq!(out, "counter 1\n");
    std::fs::remove_file(&s.only_trace().path).unwrap();
}

const LINKED: &str = r#"
int dftracer_bind_io(void);
int main(int argc, char **argv) {
    char f[512], buf[64];
    snprintf(f, sizeof f, "%s/l.txt", argv[1]);
    int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644); CHECK(fd >= 0);
    CHECK(write(fd, "abc", 3) == 3);
    CHECK(pread(fd, buf, 3, 0) == 3 && !memcmp(buf, "abc", 3));
    CHECK(dftracer_bind_io() >= 0);   /* already interposed by link order: nothing doubles */
    CHECK(pread(fd, buf, 2, 1) == 2 && !memcmp(buf, "bc", 2));
    CHECK(close(fd) == 0);
    printf("ok\n");
    return 0;
}
"#;

#[test]
fn linked_directly_the_hooks_interpose_by_link_order_and_forward_to_libc() {
    let s = Scratch::new("bind-linked");
    let libdir = lib().parent().unwrap().to_string_lossy().into_owned();
    let exe = s.compile_with(
        "linked",
        &prog(LINKED),
        &[
            &format!("-L{libdir}"),
            "-ldftracer_preload",
            &format!("-Wl,-rpath,{libdir}"),
        ],
    );
    let out = ok(bind_cmd(&s, &exe).arg(s.s("data")).output().unwrap());
    assert_eq!(out, "ok\n");
    let t = s.only_trace();
    assert_eq!(
        counts(&t, &s.s("data")),
        map(&[("open", 1), ("write", 1), ("pread", 2), ("close", 1)])
    );
}

// ---------------------------------------------------------------- 5. threads

const THREADS: &str = r#"
#define NT 8
#define AFTER 2000
static volatile int bound_flag, stop;
static pthread_barrier_t bar;
static const char *dir;
static void cycle(const char *name) {
    char f[512], buf[16];
    snprintf(f, sizeof f, "%s/%s", dir, name);
    int fd = open(f, O_RDONLY); CHECK(fd >= 0);
    CHECK(pread(fd, buf, 4, 2) == 4 && !memcmp(buf, "2345", 4));
    CHECK(close(fd) == 0);
}
static void *worker(void *a) {
    long before = 0;
    while (!bound_flag) { cycle("p1.bin"); before++; }
    pthread_barrier_wait(&bar);
    for (int i = 0; i < AFTER; i++) cycle("p2.bin");
    return (void *)before;
}
static void *binder(void *a) {
    usleep(20000);
    bind_io();
    bound_flag = 1;
    return NULL;
}
int main(int argc, char **argv) {
    dir = argv[1];
    char f[512];
    for (int k = 1; k <= 2; k++) {
        snprintf(f, sizeof f, "%s/p%d.bin", dir, k);
        int fd = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0644); CHECK(fd >= 0);
        CHECK(write(fd, "0123456789", 10) == 10); close(fd);
    }
    pthread_barrier_init(&bar, NULL, NT);
    pthread_t t[NT], b;
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, worker, NULL);
    pthread_create(&b, NULL, binder, NULL);
    long before = 0;
    for (int i = 0; i < NT; i++) { void *r; pthread_join(t[i], &r); before += (long)r; }
    pthread_join(b, NULL);
    printf("%ld\n", before);
    return 0;
}
"#;

#[test]
fn eight_threads_doing_io_while_another_binds() {
    let s = Scratch::new("bind-threads");
    let exe = s.compile_with("threads", &bprog(THREADS), &["-ldl"]);
    let out = ok(bind_cmd(&s, &exe).arg(s.s("data")).output().unwrap());
    let before: usize = out.trim().parse().unwrap();
    assert!(before > 0, "threads ran during binding");
    let t = s.only_trace();
    let c2 = counts(&t, &s.s("data/p2.bin"));
    // Every call made after the bind returned is traced, exactly once.
    assert_eq!(
        c2,
        map(&[("open", 8 * 2000), ("pread", 8 * 2000), ("close", 8 * 2000)])
    );
    // During binding some cycles were partly traced; never more than were made.
    let c1 = counts(&t, &s.s("data/p1.bin"));
    for (k, n) in &c1 {
        assert!(*n <= before, "{k}: {n} > {before}");
    }
    eprintln!("threads: {before} cycles before the bind returned; traced of them: {c1:?}");
}

// ---------------------------------------------------------------- 6. what is not patched

/// Counts, in the object behind `handle` (NULL: the main program), the GOT/data slots for
/// `read`, `open`, `fopen` and `write` that point into the tracer library.
const SLOTS: &str = r#"
#include <link.h>
#include <elf.h>
static void *lo, *hi;
static int find_tracer(struct dl_phdr_info *i, size_t sz, void *p) {
    if (!strstr(i->dlpi_name, "libdftracer_preload")) return 0;
    for (int k = 0; k < i->dlpi_phnum; k++) if (i->dlpi_phdr[k].p_type == PT_LOAD) {
        char *s = (char *)i->dlpi_addr + i->dlpi_phdr[k].p_vaddr;
        if (!lo || (void *)s < lo) lo = s;
        if ((void *)(s + i->dlpi_phdr[k].p_memsz) > hi) hi = s + i->dlpi_phdr[k].p_memsz;
    }
    return 1;
}
static uintptr_t fix(struct link_map *m, uintptr_t v) { return v < m->l_addr ? v + m->l_addr : v; }
/* returns slots naming a watched symbol; *into_tracer: those pointing into the tracer */
static int slots(void *handle, int *into_tracer) {
    struct link_map *m;
    CHECK(dlinfo(handle, RTLD_DI_LINKMAP, &m) == 0);
    if (!lo) dl_iterate_phdr(find_tracer, NULL);
    ElfW(Sym) *sym = 0; char *str = 0; ElfW(Rela) *tabs[2] = {0}; size_t szs[2] = {0};
    for (ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) switch (d->d_tag) {
        case DT_SYMTAB: sym = (void *)fix(m, d->d_un.d_ptr); break;
        case DT_STRTAB: str = (void *)fix(m, d->d_un.d_ptr); break;
        case DT_RELA: tabs[0] = (void *)fix(m, d->d_un.d_ptr); break;
        case DT_RELASZ: szs[0] = d->d_un.d_val; break;
        case DT_JMPREL: tabs[1] = (void *)fix(m, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: szs[1] = d->d_un.d_val; break;
    }
    int n = 0; *into_tracer = 0;
    for (int t = 0; t < 2; t++) for (size_t k = 0; tabs[t] && k < szs[t] / sizeof(ElfW(Rela)); k++) {
        ElfW(Rela) *r = &tabs[t][k];
        int ty = ELF64_R_TYPE(r->r_info);
        if (ty != R_X86_64_JUMP_SLOT && ty != R_X86_64_GLOB_DAT && ty != R_X86_64_64) continue;
        const char *nm = str + sym[ELF64_R_SYM(r->r_info)].st_name;
        if (strcmp(nm, "read") && strcmp(nm, "open") && strcmp(nm, "fopen") && strcmp(nm, "write")) continue;
        n++;
        void *v = *(void **)(m->l_addr + r->r_offset);
        if (v >= lo && v < hi) (*into_tracer)++;
    }
    return n;
}
int main(int argc, char **argv) {
    char f[512];
    snprintf(f, sizeof f, "%s/x.txt", argv[1]);
    FILE *F = fopen(f, "w"); CHECK(F); fputs("x", F); CHECK(fclose(F) == 0);
    bind_io();
    int in, n;
    n = slots(dlopen(NULL, RTLD_NOW), &in);           printf("main %d %d\n", n, in);
    n = slots(dft, &in);                               printf("tracer %d %d\n", n > 0, in);
    n = slots(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), &in); printf("libc %d\n", in);
    F = fopen(f, "r"); CHECK(F); char b[4]; CHECK(fread(b, 1, 1, F) == 1); CHECK(fclose(F) == 0);
    int fd = open(f, O_RDONLY); CHECK(fd >= 0); CHECK(read(fd, b, 1) == 1); CHECK(close(fd) == 0);
    return 0;
}
"#;

#[test]
fn libc_and_the_tracer_itself_are_not_patched() {
    let s = Scratch::new("bind-self");
    let exe = s.compile_with("slots", &bprog(SLOTS), &["-ldl"]);
    let out = ok(bind_cmd(&s, &exe).arg(s.s("data")).output().unwrap());
    // The program's slots for fopen/fputs... (read, open, fopen used: 3 names with slots, all
    // bound); the tracer has slots for these names and none points at itself; libc none.
    let lines: Vec<&str> = out.lines().collect();
    let main: Vec<usize> = lines[0]
        .strip_prefix("main ")
        .unwrap()
        .split(' ')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(main[0] >= 3 && main[0] == main[1], "{out}");
    assert_eq!(lines[1], "tracer 1 0", "{out}");
    assert_eq!(lines[2], "libc 0", "{out}");
    let t = s.only_trace();
    // fopen/fread/fclose: STDIO only (no POSIX open/read from inside libc); then the POSIX 3.
    assert_eq!(
        t.names(),
        ["fopen", "fread", "fclose", "open", "read", "close"]
    );
}

// ---------------------------------------------------------------- hook list

const NAMES: &str = r#"
int main(void) {
    void *h = dlopen(getenv("DFT_LIB"), RTLD_NOW | RTLD_LOCAL); CHECK(h);
    const char *(*name)(size_t) = (const char *(*)(size_t))dlsym(h, "dftracer_bind_hook_name");
    CHECK(name);
    for (size_t i = 0; name(i); i++) printf("%s\n", name(i));
    return 0;
}
"#;

/// `HOOKS` (src/hooks/mod.rs) lists exactly the library's exported functions minus its API.
#[test]
fn hook_list_matches_the_exported_functions() {
    let s = Scratch::new("bind-names");
    let exe = s.compile_with("names", &bprog(NAMES), &["-ldl"]);
    let out = ok(bind_cmd(&s, &exe).output().unwrap());
    let mut listed: Vec<&str> = out.lines().collect();
    listed.sort();
    let n = listed.len();
    listed.dedup();
    assert_eq!(n, listed.len(), "duplicates in HOOKS");
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib())
        .output()
        .expect("nm");
    let nm = String::from_utf8(nm.stdout).unwrap();
    let c_api = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dftracer/dftracer.h"),
    )
    .unwrap();
    let mut exported: Vec<&str> = nm
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "T").then_some(f[2])
        })
        .filter(|n| !n.starts_with("dftracer_"))
        // The C API (declared in the header) is ours, not a hook.
        .filter(|n| !c_api.contains(&format!(" {n}(")) && !c_api.contains(&format!("*{n}(")))
        // So are the C++ class DFTracer's members (src/cxx.rs, the reference's mangled names).
        .filter(|n| !n.starts_with("_ZN8DFTracer"))
        .collect();
    exported.sort();
    assert_eq!(listed, exported);
}

// ---------------------------------------------------------------- 7. cost

const COST: &str = r#"
#include <link.h>
static int count_objects(struct dl_phdr_info *i, size_t sz, void *p) { (*(int *)p)++; return 0; }
int main(int argc, char **argv) {
    const char *libs[] = {"libm.so.6", "libz.so.1", "libstdc++.so.6", "libgcc_s.so.1",
        "libssl.so.3", "libcrypto.so.3", "libcurl.so.4", "libxml2.so.2", "libsqlite3.so.0",
        "libpython3.11.so.1.0", "libgfortran.so.5", "libgomp.so.1", "liblzma.so.5",
        "libbz2.so.1.0", "libzstd.so.1", "libffi.so.8", "libexpat.so.1", NULL};
    int loaded = 0;
    for (int i = 0; libs[i]; i++) if (dlopen(libs[i], RTLD_NOW)) loaded++;
    dft = dlopen(getenv("DFT_LIB"), RTLD_NOW | RTLD_LOCAL); CHECK(dft);
    int objects = 0; dl_iterate_phdr(count_objects, &objects);
    double t0 = now_ms(); int n = bind_io(); double t1 = now_ms();
    int m = bind_io(); double t2 = now_ms();
    void *h = dlopen(argv[1], RTLD_NOW); CHECK(h); double t3 = now_ms();
    void *h2 = dlopen("libm.so.6", RTLD_NOW); CHECK(h2); double t4 = now_ms();
    printf("%d objects loaded (%d extra libraries dlopened); first bind %.3f ms (%d slots); repeat bind %.3f ms "
           "(%d slots); dlopen of a new library (wrapped, incl. its bind) %.3f ms; "
           "dlopen of a loaded one %.3f ms\n", objects, loaded, t1 - t0, n, t2 - t1, m, t3 - t2, t4 - t3);
    return 0;
}
"#;

#[test]
fn bind_cost_with_many_objects() {
    let s = Scratch::new("bind-cost");
    let exe = s.compile_with("cost", &bprog(COST), &["-ldl"]);
    let extra = s.compile_with("libextra.so", &prog(READER_LIB), &["-shared", "-fPIC"]);
    let out = ok(bind_cmd(&s, &exe).arg(&extra).output().unwrap());
    eprintln!("bind cost: {}", out.trim());
}

// ---------------------------------------------------------------- python, ctypes

/// The API path in miniature: Python loads the library with ctypes (`RTLD_LOCAL`) and binds;
/// its own file I/O is then traced, and importing a C extension module afterwards (through
/// the wrapped `dlopen`) works.
#[test]
fn python_loading_the_library_with_ctypes_is_traced_after_binding() {
    let s = Scratch::new("bind-python");
    std::fs::write(s.path("data/sample.txt"), "hello dataset\n".repeat(100)).unwrap();
    let script = r#"
import ctypes, os, sys
lib = ctypes.CDLL(os.environ["DFT_LIB"], mode=os.RTLD_LOCAL)
assert lib.dftracer_bind_io() >= 0
d = sys.argv[1]
with open(os.path.join(d, "sample.txt"), "rb") as f:
    n = len(f.read())
import _bz2  # an extension module loaded after binding (wrapped dlopen)
with open(os.path.join(d, "out.bin"), "wb") as f:
    f.write(b"x" * 10)
print(n, os.stat(os.path.join(d, "out.bin")).st_size)
"#;
    // The real interpreter, not a launcher script (pyenv shims are shell scripts).
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = ok(exe).trim().to_string();
    let out = ok(bind_cmd(&s, &python)
        .args(["-c", script, &s.s("data")])
        .output()
        .unwrap());
    assert_eq!(out, "1400 10\n");
    let t = s.only_trace();
    let c = counts(&t, &s.s("data"));
    assert_eq!(c.get("write"), Some(&1), "{c:?}");
    assert!(c.get("read").copied().unwrap_or(0) >= 1, "{c:?}");
    assert_eq!(c.get("close"), Some(&2), "{c:?}");
    let opens = c.get("open64").or(c.get("open")).copied().unwrap_or(0);
    assert_eq!(opens, 2, "{c:?}");
}
