//! Programs that exhaust their descriptor table, and files planted where the tracer writes.
//!
//! - A program that opens files until `EMFILE` in its first moments and exits holding them
//!   gets its whole trace (the tracer holds one descriptor for the lazily created file from
//!   its start: `sink::reserve`), and sees exactly one successful open fewer than untraced
//!   (the documented cost: FORMAT.md "Files"), under `ulimit -n 16` and `ulimit -n 1024`,
//!   through the preload (I/O events) and the C API (region events), in a fork child too.
//! - A FIFO planted at the trace path after the program closed every descriptor does not
//!   hang it (the reopen is non-blocking and refuses a non-regular file); the events that
//!   could not be written are counted as lost.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Opens `data/f` until `EMFILE` (first thing in `main`), then records `n` events on the
/// first of them (preads; with `-DCAPI` each inside a C API region `step`), prints how many
/// opens succeeded and returns holding every descriptor. `fork` as argv[2]: the same in a
/// forked child (after the parent's trace file exists), the parent waits for it; `fork2`: in
/// the grandchild of a double fork (the middle process forks before anything else).
const FILL: &str = r#"
#ifdef CAPI
#include <dftracer/dftracer.h>
#endif
static int fill_and_record(int n) {
    int opened = 0, first = -1;
    for (;;) {
        int fd = open("data/f", O_RDONLY);
        if (fd < 0) { CHECK(errno == EMFILE); break; }
        if (first < 0) first = fd;
        opened++;
    }
    CHECK(first >= 0);
    char b[4];
    for (int i = 0; i < n; i++) {
#ifdef CAPI
        DFTRACER_C_REGION_START(step);
#endif
        CHECK(pread(first, b, 4, 0) == 4);
#ifdef CAPI
        DFTRACER_C_REGION_END(step);
#endif
    }
    return opened;
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
#ifdef CAPI
    DFTRACER_C_INIT(NULL, argv[3], NULL);
#endif
    if (argc > 2 && !strcmp(argv[2], "fork")) {
        /* The parent's own file exists before the fork (the child inherits its descriptor). */
        int fd = open("data/f", O_RDONLY);
        CHECK(fd >= 0);
        char b[4];
        CHECK(pread(fd, b, 4, 0) == 4);
        CHECK(close(fd) == 0);
        usleep(300 * 1000);
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            printf("%d\n", fill_and_record(n));
            return 0;
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[2], "fork2")) {
        /* A daemonizer's double fork: the middle process forks before anything else. */
        int fd = open("data/f", O_RDONLY);
        CHECK(fd >= 0);
        char b[4];
        CHECK(pread(fd, b, 4, 0) == 4);
        CHECK(close(fd) == 0);
        usleep(300 * 1000);
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            pid_t g = fork();
            CHECK(g >= 0);
            if (g == 0) {
                printf("%d\n", fill_and_record(n));
                return 0;
            }
            int st;
            CHECK(waitpid(g, &st, 0) == g);
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        return 0;
    }
    printf("%d\n", fill_and_record(n));
    return 0;
}
"#;

/// `sh -c 'ulimit -n LIMIT; exec PROG ARGS'`, in `s.dir`.
fn limited(s: &Scratch, limit: u32, exe: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.current_dir(&s.dir)
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .env_remove("LD_PRELOAD")
        .env_remove("DFTRACER_ENABLE")
        .env_remove("DFTRACER_INIT")
        .env_remove("DFTRACER_DATA_DIR")
        .env_remove("DFTRACER_CONFIGURATION")
        .env_remove("DFTRACER_INC_METADATA");
    c
}

/// The successful opens a program printed (one line per process that filled its table).
fn opens_of(out: std::process::Output) -> u64 {
    let text = ok(out);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("stdout: {text:?}"))
}

#[derive(Clone, Copy, PartialEq)]
enum Via {
    Preload,
    Capi,
}

fn profile_dir() -> PathBuf {
    lib().parent().unwrap().to_path_buf()
}

fn build(s: &Scratch, via: Via) -> PathBuf {
    match via {
        Via::Preload => s.compile("fill", &prog(FILL)),
        Via::Capi => {
            let inc = format!("-I{}/include", env!("CARGO_MANIFEST_DIR"));
            let libdir = format!("-L{}", profile_dir().display());
            let rpath = format!("-Wl,-rpath,{}", profile_dir().display());
            s.compile_with(
                "fill",
                &prog(FILL),
                &["-DCAPI", &inc, &libdir, "-ldftracer_core", &rpath],
            )
        }
    }
}

/// Runs the filler untraced and traced under `ulimit -n limit`; checks the trace holds every
/// event and the traced program saw exactly one open fewer.
fn fill(via: Via, limit: u32, mode: &str) {
    let s = Scratch::new(&format!("fill-{limit}-{mode}"));
    std::fs::write(s.path("data/f"), [5u8; 64]).unwrap();
    let exe = build(&s, via);
    let n = 500;
    let data = s.s("data");
    let args = [n.to_string(), mode.to_string(), data.clone()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Untraced: no preload; the C API program with tracing off.
    let untraced = opens_of(limited(&s, limit, &exe, &args).output().unwrap());
    assert!(s.traces().is_empty(), "untraced run wrote {:?}", s.traces());
    let mut c = limited(&s, limit, &exe, &args);
    c.env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"));
    if via == Via::Preload {
        c.env("LD_PRELOAD", lib())
            .env("DFTRACER_INIT", "PRELOAD")
            .env("DFTRACER_DATA_DIR", &data);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let traced = opens_of(out);
    assert!(!stderr.contains("DFTRACER"), "{stderr}");
    assert_eq!(
        traced + 1,
        untraced,
        "limit {limit}: the traced program has exactly one descriptor fewer"
    );
    let traces = s.traces();
    // The parent's, the filler's, and in "fork2" the middle process's (its fork and waitpid).
    let want = match mode {
        "plain" => 1,
        "fork" => 2,
        _ => 3,
    };
    assert_eq!(traces.len(), want, "{traces:?}; stderr: {stderr}");
    let is_fork = |p: &PathBuf| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        name.ends_with("-fork.pfw.gz")
    };
    let t = traces
        .iter()
        .filter(|p| mode == "plain" || is_fork(p))
        .map(|p| Trace::read(p))
        .find(|t| t.names().iter().any(|n| n == "pread"))
        .expect("the filler's trace");
    assert!(t.has_end(), "no end record");
    let end = t.lines.iter().find(|l| l["name"] == "end").unwrap();
    assert_eq!(end["args"]["lost"], 0);
    assert_eq!(end["args"]["dropped"], 0);
    let names = t.names();
    assert_eq!(
        names.iter().filter(|n| *n == "pread").count(),
        n,
        "every pread"
    );
    // Every successful open, and the one that failed with EMFILE.
    let opens = names.iter().filter(|n| n.starts_with("open")).count() as u64;
    assert_eq!(opens, traced + 1, "every open");
    if via == Via::Capi {
        let steps = t
            .lines
            .iter()
            .filter(|l| l["ph"] == 1 && l["name"] == "step")
            .count();
        assert_eq!(steps, n, "every region");
    }
}

#[test]
fn preload_a_program_that_exhausts_16_fds_keeps_its_trace() {
    fill(Via::Preload, 16, "plain");
}

#[test]
fn preload_a_program_that_exhausts_1024_fds_keeps_its_trace() {
    fill(Via::Preload, 1024, "plain");
}

#[test]
fn capi_a_program_that_exhausts_16_fds_keeps_its_trace() {
    fill(Via::Capi, 16, "plain");
}

#[test]
fn capi_a_program_that_exhausts_1024_fds_keeps_its_trace() {
    fill(Via::Capi, 1024, "plain");
}

#[test]
fn a_fork_child_that_exhausts_its_fds_keeps_its_trace() {
    fill(Via::Preload, 64, "fork");
    fill(Via::Preload, 1024, "fork");
}

#[test]
fn a_grandchild_of_a_double_fork_that_exhausts_its_fds_keeps_its_trace() {
    fill(Via::Preload, 64, "fork2");
}

/// A traced process that records nothing still leaves no file, and its descriptor comes
/// back at exit (nothing to check from outside but the file).
#[test]
fn a_process_that_records_nothing_leaves_no_file() {
    let s = Scratch::new("fill-nothing");
    std::fs::write(s.path("data/f"), [5u8; 64]).unwrap();
    let exe = build(&s, Via::Preload);
    let out = limited(&s, 16, &exe, &["0"])
        .env("LD_PRELOAD", lib())
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_INIT", "PRELOAD")
        .env("DFTRACER_LOG_FILE", s.path("o/trace"))
        .env("DFTRACER_DATA_DIR", s.s("data2"))
        .output()
        .unwrap();
    opens_of(out);
    assert!(s.traces().is_empty(), "{:?}", s.traces());
}

/// Records a burst, lets it reach the file, replaces the trace file by a FIFO at its path
/// (`reader`: and holds the FIFO open for reading, so a non-blocking open for writing
/// succeeds and only `fstat` tells), closes every descriptor, records another burst, says
/// `ready`, then returns (`exit`) or waits for a signal (`wait`).
const FIFO: &str = r#"
#include <dirent.h>
#include <sys/syscall.h>
static void reads(int n) {
    int fd = open("data/f", O_RDONLY);
    CHECK(fd >= 0);
    char b[16];
    for (int i = 0; i < n; i++) CHECK(pread(fd, b, 16, 0) == 16);
    CHECK(close(fd) == 0);
}
int main(int argc, char **argv) {
    int reader = !strcmp(argv[1], "reader");
    int wait = !strcmp(argv[2], "wait");
    int n = atoi(argv[3]);
    reads(n);
    usleep(400 * 1000);
    char path[4096] = "";
    DIR *d = opendir("o");
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".pfw.gz")) snprintf(path, sizeof path, "o/%s", e->d_name);
    closedir(d);
    CHECK(path[0] != 0);
    CHECK(unlink(path) == 0);
    CHECK(mkfifo(path, 0644) == 0);
    closefrom(3);
    if (reader) CHECK(open(path, O_RDONLY | O_NONBLOCK) >= 0);
    reads(n);
    printf("ready\n");
    fflush(stdout);
    if (wait) for (;;) pause();
    usleep(400 * 1000);
    return 0;
}
"#;

fn fifo(reader: bool, wait: bool) {
    let s = Scratch::new(&format!("fifo-{reader}-{wait}"));
    std::fs::write(s.path("data/f"), [7u8; 64]).unwrap();
    let exe = s.compile("fifo", &prog(FIFO));
    let n = 300;
    let mut child = spawn_ready(
        s.cmd(&exe, Some(&s.s("data")))
            .env("DFTRACER_FLUSH_INTERVAL_MS", "100")
            .args([
                if reader { "reader" } else { "none" },
                if wait { "wait" } else { "exit" },
                &n.to_string(),
            ])
            .stderr(Stdio::piped()),
    );
    if wait {
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill on our own child's pid (not yet waited for, so not recycled).
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("reader={reader} wait={wait}: the program hung on the planted FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    use std::os::unix::process::ExitStatusExt;
    if wait {
        assert_eq!(status.signal(), Some(15), "dies by its SIGTERM; {stderr}");
    } else {
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("not a regular file"))
        .collect();
    assert_eq!(refusals.len(), 1, "one line says why: {stderr}");
    assert!(refusals[0].contains("fifo"), "{stderr}");
    // The second burst (n preads, its open and close) could not be written: counted.
    let lost: u64 = stderr
        .lines()
        .find_map(|l| {
            let (head, _) = l.split_once(" lost (write errors)")?;
            head.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no loss line: {stderr}"));
    assert!(lost >= n as u64 + 2, "lost {lost}: {stderr}");
    // The FIFO is still there, untouched (nothing but our refusal happened to it).
    let fifo = s
        .traces()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".pfw.gz"))
        .unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn a_fifo_planted_at_the_trace_path_does_not_hang_the_program() {
    fifo(false, false);
}

#[test]
fn a_fifo_with_a_reader_at_the_trace_path_is_refused() {
    fifo(true, false);
}

#[test]
fn sigterm_still_ends_a_program_whose_trace_path_is_a_fifo() {
    fifo(false, true);
}
