//! Host programs that do what programs do to file descriptors (close them all, `dup2` over
//! them, shell redirections) and disks that fill up: the program's own files must come out
//! byte-identical to an untraced run, and the trace complete and valid.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A C program that records `n` traced preads, lets the tracer write a member (so its file
/// and descriptor exist), attacks the descriptors the way `how` says, writes its own file
/// `out.txt` through fd 3 onwards, records `n` more preads, lets another member out, and
/// writes again.
const ATTACK: &str = r#"
#include <linux/close_range.h>
#include <sys/syscall.h>
static void reads(int n) {
    int fd = open("data/f", O_RDONLY);
    CHECK(fd >= 0);
    char b[16];
    for (int i = 0; i < n; i++) CHECK(pread(fd, b, 16, 0) == 16);
    close(fd);
}
int main(int argc, char **argv) {
    const char *how = argv[1];
    int n = atoi(argv[2]);
    reads(n);
    usleep(400 * 1000);
    int user = -1;
    if (!strcmp(how, "loop")) {
        for (int i = 3; i < 1024; i++) close(i);
    } else if (!strcmp(how, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(how, "close_range")) {
        CHECK(syscall(SYS_close_range, 3, ~0U, 0) == 0);
    } else if (!strcmp(how, "dup2")) {
        /* Every descriptor from 3 up now names the user's file. */
        user = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        CHECK(user >= 0);
        struct rlimit rl; getrlimit(RLIMIT_NOFILE, &rl);
        for (int i = 3; i < (int)rl.rlim_cur && i < 4096; i++) if (i != user) dup2(user, i);
    }
    if (user < 0) {
        user = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        CHECK(user >= 0);
    }
    CHECK(write(user, "user line 1\n", 12) == 12);
    reads(n);
    usleep(400 * 1000);
    CHECK(write(user, "user line 2\n", 12) == 12);
    printf("%d\n", user);
    return 0;
}
"#;

fn attack(how: &str) {
    let s = Scratch::new(&format!("attack-{how}"));
    std::fs::write(s.path("data/f"), [7u8; 64]).unwrap();
    let exe = s.compile("attack", &prog(ATTACK));
    let n = 500;
    let out = s
        .cmd(&exe, Some(&s.s("data")))
        .env("DFTRACER_FLUSH_INTERVAL_MS", "100")
        .args([how, &n.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(out);
    assert_eq!(
        std::fs::read(s.path("out.txt")).unwrap(),
        b"user line 1\nuser line 2\n",
        "{how}: the program's file got bytes it did not write; stderr: {stderr}"
    );
    assert!(!stderr.contains("ERROR"), "{how}: {stderr}");
    let t = s.only_trace();
    assert!(t.has_end(), "{how}: no end record");
    let preads = t.names().iter().filter(|n| *n == "pread").count();
    assert_eq!(preads, 2 * n, "{how}: every pread in the trace");
    let lost = t
        .lines
        .iter()
        .find(|l| l["name"] == "end")
        .map(|l| l["args"]["lost"].as_u64().unwrap())
        .unwrap();
    assert_eq!(lost, 0, "{how}");
}

#[test]
fn a_close_loop_over_every_fd_leaves_the_users_file_alone() {
    attack("loop");
}

#[test]
fn closefrom_leaves_the_users_file_alone() {
    attack("closefrom");
}

#[test]
fn close_range_leaves_the_users_file_alone() {
    attack("close_range");
}

#[test]
fn dup2_over_every_fd_leaves_the_users_file_alone() {
    attack("dup2");
}

/// Runs `script` with bash, traced and untraced, in fresh scratch dirs; returns the traced
/// scratch and stderr after checking that `files` are byte-identical between the two runs.
fn bash_both(name: &str, script: &str, files: &[&str]) -> (Scratch, String) {
    let run = |traced: bool| {
        let s = Scratch::new(&format!("{name}-{traced}"));
        std::fs::write(s.path("data/f"), b"line one\nline two\n").unwrap();
        let mut c = if traced {
            s.cmd("bash", Some(&s.s("data")))
        } else {
            let mut c = Command::new("bash");
            c.current_dir(&s.dir).stdin(Stdio::null());
            c
        };
        let out = c
            .env("DFTRACER_FLUSH_INTERVAL_MS", "100")
            .args(["-c", script])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        ok(out);
        (s, stderr)
    };
    let (plain, _) = run(false);
    let (traced, stderr) = run(true);
    for f in files {
        assert_eq!(
            std::fs::read(traced.path(f)).unwrap(),
            std::fs::read(plain.path(f)).unwrap(),
            "{name}: {f} differs from the untraced run; stderr: {stderr}"
        );
    }
    assert!(!stderr.contains("DFTRACER"), "{name}: {stderr}");
    (traced, stderr)
}

/// The bash process's own trace (the one with `read` builtins' events on data/f).
fn bash_trace(s: &Scratch) -> Trace {
    let mut found: Vec<Trace> = s
        .traces()
        .iter()
        .map(|p| Trace::read(p))
        .filter(|t| {
            t.io().iter().any(|e| e["name"] == "read")
                && t.lines.iter().any(|l| {
                    l["name"] == "SH"
                        && l["args"]["name"]
                            .as_str()
                            .is_some_and(|v| v.starts_with("bash"))
                })
        })
        .collect();
    assert_eq!(found.len(), 1, "one bash trace");
    found.remove(0)
}

#[test]
fn bash_exec_3_redirect_gets_only_the_scripts_lines() {
    let script = r#"
        while read l; do :; done < data/f
        sleep 0.3
        exec 3>fd3.txt
        echo first >&3
        while read l; do :; done < data/f
        sleep 0.3
        echo second >&3
        exec 3>&-
    "#;
    let (s, _) = bash_both("bash-exec3", script, &["fd3.txt"]);
    let t = bash_trace(&s);
    assert!(t.has_end());
    let opens = t
        .io()
        .iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("open"))
        .count();
    assert_eq!(opens, 2, "both loops' opens of data/f are traced");
}

#[test]
fn bash_pipe_into_a_group_keeps_the_trace() {
    // The group runs in a forked bash that traces into its own file and then has its
    // descriptors rearranged for the pipe.
    let script = r#"
        while read l; do :; done < data/f
        sleep 0.3
        echo hi | { while read l; do :; done < data/f; sleep 0.5; cat; while read l; do :; done < data/f; } > out.txt
        while read l; do :; done < data/f
        sleep 0.3
    "#;
    let (s, _) = bash_both("bash-pipe", script, &["out.txt"]);
    let mut opens = 0;
    for p in s.traces() {
        let t = Trace::read(&p);
        assert!(t.has_end(), "{}: no end record", p.display());
        opens += t
            .io()
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with("open"))
            .count();
    }
    assert_eq!(
        opens, 4,
        "two opens in the script's bash, two in the group's"
    );
}

#[test]
fn sqlite3_script_database_and_trace_intact() {
    if Command::new("sqlite3").arg("-version").output().is_err() {
        eprintln!("SKIP sqlite3_script_database_and_trace_intact: sqlite3 is not installed");
        return;
    }
    let sql = "create table t(a integer, b text);\n\
               begin;\n\
               with recursive c(x) as (select 1 union all select x+1 from c where x < 2000)\n\
               insert into t select x, 'row ' || x from c;\n\
               commit;\n\
               .shell sleep 0.3\n\
               .output data/dump.txt\n\
               select count(*), sum(a) from t;\n\
               .dump\n";
    let script = format!("sqlite3 data/db.sqlite <<'EOF'\n{sql}EOF\n");
    let (s, _) = bash_both("sqlite3", &script, &["data/dump.txt"]);
    let dump = std::fs::read_to_string(s.path("data/dump.txt")).unwrap();
    assert!(dump.starts_with("2000|2001000\n"), "{dump:.40}");
    // sqlite3's own trace: complete, with its database I/O.
    let t = s
        .traces()
        .iter()
        .map(|p| Trace::read(p))
        .find(|t| t.io().iter().any(|e| e["name"] == "pwrite64"))
        .expect("a trace with sqlite3's database writes");
    assert!(t.has_end());
}

/// Mounts a small tmpfs at `dir` (root only); `None` (and a visible reason) if impossible.
fn small_tmpfs(dir: &Path, size: &str) -> Option<()> {
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "SKIP full-disk test: cannot mount a tmpfs ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(())
}

struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fills the disk of `o/` between two bursts of events; `free` says whether the filler is
/// removed before the end.
const FULL: &str = r#"
static void reads(int n) {
    int fd = open("data/f", O_RDONLY);
    CHECK(fd >= 0);
    char b[16];
    for (int i = 0; i < n; i++) CHECK(pread(fd, b, 16, 0) == 16);
    close(fd);
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    int free_it = atoi(argv[2]);
    reads(n);
    usleep(300 * 1000);                 /* a member reaches the file */
    int fill = open("o/filler", O_WRONLY | O_CREAT, 0644);
    CHECK(fill >= 0);
    static char block[4096];
    while (write(fill, block, sizeof block) > 0) {}
    CHECK(errno == ENOSPC);
    close(fill);
    reads(n);
    usleep(300 * 1000);                 /* this member does not fit */
    reads(n);
    usleep(300 * 1000);
    if (free_it) {
        CHECK(unlink("o/filler") == 0);
        reads(n);
        usleep(300 * 1000);
    }
    return 0;
}
"#;

fn full_disk(free_it: bool) -> Option<(Trace, String, usize)> {
    let s = Scratch::new(&format!("full-{free_it}"));
    std::fs::write(s.path("data/f"), [7u8; 64]).unwrap();
    let exe = s.compile("full", &prog(FULL));
    small_tmpfs(&s.path("o"), "256k")?;
    let _u = Unmount(s.path("o"));
    let n = 2000;
    let out = s
        .cmd(&exe, Some(&s.s("data")))
        .env("DFTRACER_FLUSH_INTERVAL_MS", "100")
        .args([n.to_string(), (free_it as u8).to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(out);
    let trace = s
        .traces()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".pfw.gz"))
        .expect("a trace file");
    // gzip -t: every member whole (the reader below would also fail on a torn one).
    let gz = Command::new("gzip").arg("-t").arg(&trace).output().unwrap();
    assert!(
        gz.status.success(),
        "gzip -t: {}",
        String::from_utf8_lossy(&gz.stderr)
    );
    Some((Trace::read(&trace), stderr, n))
}

#[test]
fn a_full_disk_keeps_whole_members_and_resumes_when_space_returns() {
    let Some((t, stderr, n)) = full_disk(true) else {
        return;
    };
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains("again"), "{stderr}");
    assert!(t.has_end(), "end written once space returned");
    let preads = t.names().iter().filter(|n| *n == "pread").count();
    // Held members were written once there was room: nothing lost.
    assert_eq!(preads, 4 * n);
    let end = t.lines.iter().find(|l| l["name"] == "end").unwrap();
    assert_eq!(end["args"]["lost"], 0);
}

#[test]
fn a_disk_that_stays_full_keeps_whole_members_and_counts_the_loss() {
    let Some((t, stderr, n)) = full_disk(false) else {
        return;
    };
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let preads = t.names().iter().filter(|n| *n == "pread").count();
    assert!(preads >= n, "the first burst reached the file");
    // Every event not in the file is counted as lost on stderr: 3 bursts of n preads plus
    // their opens and closes, minus what the file holds.
    let total = 3 * (n + 2);
    let in_file = t.io().len();
    let lost = total - in_file;
    assert!(lost > 0);
    assert!(
        stderr.contains(&format!("{lost} lost (write errors)")),
        "expected {lost} lost in: {stderr}"
    );
}

/// I/O in an `atexit` handler, after glibc ran the main thread's TLS destructors (coreutils
/// closes `stdout` there): recorded like any other.
const ATEXIT: &str = r#"
static int fd = -1;
static void late(void) {
    char b[8];
    for (int i = 0; i < 10; i++) CHECK(pread(fd, b, 8, 0) == 8);
    CHECK(close(fd) == 0);
}
int main(int argc, char **argv) {
    char b[8];
    fd = open(argv[1], O_RDONLY);
    CHECK(fd >= 0);
    for (int i = 0; i < 5; i++) CHECK(pread(fd, b, 8, 0) == 8);
    atexit(late);
    return 0;
}
"#;

#[test]
fn io_in_an_atexit_handler_is_recorded() {
    let s = Scratch::new("atexit");
    std::fs::write(s.path("data/f"), [1u8; 64]).unwrap();
    let exe = s.compile("atexit", &prog(ATEXIT));
    ok(s.cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data/f"))
        .output()
        .unwrap());
    let t = s.only_trace();
    let names = t.names();
    assert_eq!(
        names.iter().filter(|n| *n == "pread").count(),
        15,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| *n == "close").count(),
        1,
        "{names:?}"
    );
    assert!(t.has_end());
}

/// A program that reads a traced file, `dlopen`s a library (the binding pass runs for it)
/// that reads it too, and prints what its `malloc` heap holds (`mallinfo2`).
const HEAP: &str = r#"
#include <dlfcn.h>
#include <malloc.h>
int main(int argc, char **argv) {
    char b[16];
    int fd = open(argv[1], O_RDONLY);
    CHECK(fd >= 0);
    for (int i = 0; i < 50; i++) CHECK(pread(fd, b, 16, 0) == 16);
    close(fd);
    void *h = dlopen(argv[2], RTLD_NOW);
    CHECK(h != NULL);
    int (*f)(const char *) = (int (*)(const char *))dlsym(h, "lib_read");
    CHECK(f != NULL && f(argv[1]) == 8);
    struct mallinfo2 m = mallinfo2();
    printf("%zu %zu\n", m.uordblks, m.ordblks);
    return 0;
}
"#;

const HEAP_LIB: &str = r#"
#include <fcntl.h>
#include <unistd.h>
int lib_read(const char *p) {
    char b[8];
    int fd = open(p, O_RDONLY);
    int n = pread(fd, b, 8, 0);
    close(fd);
    return n;
}
"#;

/// The tracer's allocations (its tables, the binding pass's plans, the writer's buffers) are
/// not on the program's heap: the bytes in use there are an untraced run's, within what
/// glibc allocates for the calls the tracer makes (a thread, `dlopen`, `dlerror`). The tracer
/// on glibc's heap put 140 KB there and left the pass's freed temporaries among the program's
/// blocks (ninety free chunks that Open MPI's later mallocs searched).
#[test]
fn the_tracers_memory_is_not_on_the_programs_heap() {
    let s = Scratch::new("heap");
    std::fs::write(s.path("data/f"), [7u8; 64]).unwrap();
    let lib = s.compile_with("libheap.so", HEAP_LIB, &["-shared", "-fPIC"]);
    let exe = s.compile_with("heap", &prog(HEAP), &["-ldl"]);
    let heap = |out: String| -> (usize, usize) {
        let v: Vec<usize> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (v[0], v[1])
    };
    let (plain_used, plain_free) = heap(ok(Command::new(&exe)
        .arg(s.path("data/f"))
        .arg(&lib)
        .current_dir(s.path(""))
        .output()
        .unwrap()));
    let (used, free) = heap(ok(s
        .cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data/f"))
        .arg(&lib)
        .output()
        .unwrap()));
    assert!(
        used < plain_used + 8192,
        "the traced run has {used} bytes in use on the program's heap, the untraced {plain_used}"
    );
    assert!(
        free <= plain_free + 2,
        "the traced run leaves {free} free chunks in the program's heap, the untraced {plain_free}"
    );
    // The pass ran: the library's pread is traced.
    let names = s.only_trace().names();
    assert_eq!(
        names.iter().filter(|n| *n == "pread").count(),
        51,
        "{names:?}"
    );
}
