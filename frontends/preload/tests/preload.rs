//! End-to-end tests of `libdftracer_preload.so`: small C programs (and `python3 -c`) are
//! compiled at test time with `gcc`, run with `LD_PRELOAD` set to the library cargo built for
//! this test run, and the real trace files they wrote are read back with a real gzip decoder
//! (flate2's `MultiGzDecoder`, every member) and a real JSON parser (every line).
//!
//! `cargo test -p dftracer-preload` builds the cdylib before running these tests (it is the
//! package's library target); the path is derived from this test binary's own location, so a
//! custom `CARGO_TARGET_DIR` works too. Each test uses its own scratch directory, so tests run
//! in parallel.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

// ---------------------------------------------------------------- every call

const ALL_CALLS: &str = r#"
int main(int argc, char **argv) {
    const char *d = argv[1];
    char f[512], g[512], buf[8192];
    memset(buf, 'a', sizeof buf);
    snprintf(f, sizeof f, "%s/f.bin", d);
    snprintf(g, sizeof g, "%s/g.bin", d);
    int fd = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0644);          CHECK(fd >= 0);
    CHECK(write(fd, buf, 4096) == 4096);
    CHECK(pwrite(fd, buf, 100, 8192) == 100);
    CHECK(pwrite64(fd, buf, 10, 9000) == 10);
    struct iovec iov[2] = {{buf, 10}, {buf, 20}};
    CHECK(writev(fd, iov, 2) == 30);
    CHECK(pwritev(fd, iov, 2, 100) == 30);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(lseek64(fd, 5, SEEK_SET) == 5);
    CHECK(fsync(fd) == 0);
    CHECK(fdatasync(fd) == 0);
    CHECK(ftruncate(fd, 10000) == 0);
    CHECK(close(fd) == 0);
    fd = open64(f, O_RDONLY);                                          CHECK(fd >= 0);
    CHECK(read(fd, buf, 1000) == 1000);
    CHECK(pread(fd, buf, 10, 5) == 10);
    CHECK(pread64(fd, buf, 11, 6) == 11);
    CHECK(readv(fd, iov, 2) == 30);
    CHECK(preadv(fd, iov, 2, 7) == 30);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 10000);
    void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);        CHECK(m != MAP_FAILED);
    munmap(m, 4096);
    int fd2 = dup(fd);                                                 CHECK(fd2 >= 0);
    CHECK(dup2(fd, 100) == 100);
    CHECK(dup3(fd, 101, O_CLOEXEC) == 101);
    int fd3 = fcntl(fd, F_DUPFD, 200);                                 CHECK(fd3 >= 200);
    CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK(close(fd) == 0);
    CHECK(pread(fd3, buf, 3, 0) == 3);     /* the dup'ed fd still names the file */
    CHECK(close(fd2) == 0 && close(100) == 0 && close(101) == 0 && close(fd3) == 0);
    CHECK(stat(f, &st) == 0);
    CHECK(lstat(f, &st) == 0);
    CHECK(fstatat(AT_FDCWD, f, &st, 0) == 0);
    struct statx sx;
    CHECK(statx(AT_FDCWD, f, 0, STATX_SIZE, &sx) == 0);
    CHECK(access(f, R_OK) == 0);
    fd = openat(AT_FDCWD, f, O_RDONLY);                                CHECK(fd >= 0);
    CHECK(read(fd, buf, 7) == 7);
    CHECK(close(fd) == 0);
    int dfd = open(d, O_RDONLY | O_DIRECTORY);                         CHECK(dfd >= 0);
    fd = openat(dfd, "f.bin", O_RDONLY);                               CHECK(fd >= 0);
    CHECK(close(fd) == 0);
    CHECK(close(dfd) == 0);
    fd = creat(g, 0600);                                               CHECK(fd >= 0);
    CHECK(close(fd) == 0);
    FILE *F = fopen(f, "r+");                                          CHECK(F);
    CHECK(fread(buf, 1, 50, F) == 50);
    CHECK(fseek(F, 10, SEEK_SET) == 0);
    CHECK(ftell(F) == 10);
    CHECK(fgets(buf, 20, F) != NULL);
    CHECK(fwrite(buf, 2, 3, F) == 3);
    CHECK(fputs("hello", F) >= 0);
    CHECK(fflush(F) == 0);
    CHECK(fclose(F) == 0);
    fd = open(f, O_RDONLY);                                            CHECK(fd >= 0);
    F = fdopen(fd, "r");                                               CHECK(F);
    CHECK(fread(buf, 1, 5, F) == 5);
    CHECK(fclose(F) == 0);
    char h[600];
    snprintf(h, sizeof h, "%s/sub", d);
    CHECK(mkdir(h, 0755) == 0);
    DIR *D = opendir(h);                                               CHECK(D);
    closedir(D);
    CHECK(rmdir(h) == 0);
    CHECK(rename(g, h) == 0);
    CHECK(unlink(h) == 0);
    puts("done");
    return 0;
}
"#;

#[test]
fn every_interposed_call_records_the_right_event() {
    let s = Scratch::new("all");
    let exe = s.compile("all", &prog(ALL_CALLS));
    let out = ok(s
        .cmd(&exe, Some(&s.s("data")))
        // Each call as its event (folded: `low_information_calls_are_counted`).
        .env("DFTRACER_FOLD_CALLS", "0")
        .arg(s.path("data"))
        .output()
        .unwrap());
    assert_eq!(out, "done\n", "the program's stdout is untouched");
    let t = s.only_trace();
    let names = t.names();
    let expected = [
        "open",
        "write",
        "pwrite",
        "pwrite64",
        "writev",
        "pwritev",
        "lseek",
        "lseek64",
        "fsync",
        "fdatasync",
        "ftruncate",
        "close",
        "open64",
        "read",
        "pread",
        "pread64",
        "readv",
        "preadv",
        "fstat",
        "mmap",
        "munmap",
        "dup",
        "dup2",
        "dup3",
        "fcntl",
        "fcntl",
        "close",
        "pread",
        "close",
        "close",
        "close",
        "close",
        "stat",
        "lstat",
        "fstatat",
        "statx",
        "access",
        "openat",
        "read",
        "close",
        "open",
        "openat",
        "close",
        "close",
        "creat",
        "close",
        "fopen",
        "fread",
        "fseek",
        "ftell",
        "fgets",
        "fwrite",
        "fputs",
        "fflush",
        "fclose",
        "open",
        "fdopen",
        "fread",
        "fclose",
        "mkdir",
        "opendir",
        "closedir",
        "rmdir",
        "rename",
        "unlink",
    ];
    assert_eq!(names, expected, "event sequence");
    let ev = t.io();
    let f = s.s("data/f.bin");
    let arg = |i: usize, k: &str| ev[i]["args"][k].clone();
    // open: flags, mode (O_CREAT), fd, ret, fhash
    assert_eq!(
        arg(0, "flags"),
        libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC
    );
    assert_eq!(arg(0, "mode"), 0o644);
    let fd = arg(0, "fd").as_i64().unwrap();
    assert!(fd >= 3);
    assert_eq!(arg(0, "ret"), fd);
    let keys: Vec<&String> = ev[0]["args"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["hhash", "flags", "mode", "fd", "ret", "fhash"],
        "args in order"
    );
    // write: fd, count, ret
    assert_eq!(
        (arg(1, "fd"), arg(1, "count"), arg(1, "ret")),
        (fd.into(), 4096.into(), 4096.into())
    );
    assert_eq!(
        (arg(2, "count"), arg(2, "offset"), arg(2, "ret")),
        (100.into(), 8192.into(), 100.into())
    );
    assert_eq!(
        (arg(4, "count"), arg(4, "iovcnt"), arg(4, "ret")),
        (30.into(), 2.into(), 30.into())
    );
    assert_eq!(arg(5, "offset"), 100);
    assert_eq!(
        (arg(6, "offset"), arg(6, "whence"), arg(6, "ret")),
        (0.into(), 0.into(), 0.into())
    );
    assert_eq!((arg(7, "offset"), arg(7, "ret")), (5.into(), 5.into()));
    assert_eq!(
        (arg(10, "length"), arg(10, "ret")),
        (10000.into(), 0.into())
    );
    assert_eq!(arg(12, "flags"), libc::O_RDONLY);
    assert!(
        ev[12]["args"].get("mode").is_none(),
        "no mode without O_CREAT"
    );
    assert_eq!(
        (arg(13, "count"), arg(13, "ret")),
        (1000.into(), 1000.into())
    );
    assert_eq!(
        (arg(14, "count"), arg(14, "offset"), arg(14, "ret")),
        (10.into(), 5.into(), 10.into())
    );
    assert_eq!(arg(19, "length"), 4096);
    // munmap of the traced mapping names the file, after its fd was closed
    assert_eq!((arg(20, "length"), arg(20, "ret")), (4096.into(), 0.into()));
    // dup family: the event is on the old fd, ret is the new one
    assert_eq!(arg(22, "ret"), 100);
    assert_eq!(arg(23, "ret"), 101);
    assert!(arg(24, "ret").as_i64().unwrap() >= 200);
    assert_eq!(arg(24, "cmd"), libc::F_DUPFD);
    assert_eq!(arg(25, "cmd"), libc::F_GETFL);
    // the read through the F_DUPFD copy after the original was closed
    assert_eq!(arg(27, "fd"), arg(24, "ret"));
    // openat(AT_FDCWD) then read/close on its fd
    assert_eq!(arg(38, "fd"), arg(37, "fd"));
    // openat with a real dirfd resolves against the directory
    assert_eq!(t.file_of(ev[40]), s.s("data"));
    assert_eq!(t.file_of(ev[41]), f);
    // stdio
    assert_eq!(arg(46, "mode"), "r+");
    assert_eq!(
        (arg(47, "size"), arg(47, "count"), arg(47, "ret")),
        (1.into(), 50.into(), 50.into())
    );
    assert_eq!((arg(48, "offset"), arg(48, "ret")), (10.into(), 0.into()));
    assert_eq!(arg(49, "ret"), 10);
    assert_eq!(arg(50, "count"), 20);
    assert_eq!(arg(51, "ret"), 3);
    assert_eq!(arg(52, "count"), 5);
    assert_eq!(arg(56, "mode"), "r");
    // path calls
    assert_eq!(arg(59, "mode"), 0o755);
    assert_eq!(t.file_of(ev[59]), s.s("data/sub"));
    assert_eq!(t.file_of(ev[63]), s.s("data/g.bin"));
    let newh = arg(63, "newpath_hash");
    assert_eq!(t.files()[newh.as_str().unwrap()], s.s("data/sub"));
    // every event carries a resolvable fhash naming a file under data/, and sane times
    for e in &ev {
        assert!(t.file_of(e).starts_with(&s.s("data")), "{e}");
        assert_eq!(
            e["cat"],
            if [
                "fopen", "fread", "fseek", "ftell", "fgets", "fwrite", "fputs", "fflush", "fclose",
                "fdopen"
            ]
            .contains(&e["name"].as_str().unwrap())
            {
                "STDIO"
            } else {
                "POSIX"
            }
        );
        assert!(e["ts"].as_u64().unwrap() > 0 && e["dur"].is_u64());
        assert_eq!(e["pid"], e["tid"]);
    }
    assert!(t.has_end());
}

// ---------------------------------------------------------------- DATA_DIR

const IO_IN: &str = r#"
int main(int argc, char **argv) {
    char buf[4096], f[600];
    for (int i = 1; i < argc; i++) {
        snprintf(f, sizeof f, "%s/x.bin", argv[i]);
        int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644);   CHECK(fd >= 0);
        CHECK(write(fd, "abcdef", 6) == 6);
        CHECK(pread(fd, buf, 3, 1) == 3);
        CHECK(close(fd) == 0);
        fd = openat(AT_FDCWD, f, O_RDONLY);                   CHECK(fd >= 0);
        CHECK(read(fd, buf, 6) == 6);
        CHECK(close(fd) == 0);
        FILE *F = fopen(f, "r");                              CHECK(F);
        CHECK(fread(buf, 1, 6, F) == 6);
        CHECK(fclose(F) == 0);
        struct stat st;
        CHECK(stat(f, &st) == 0);
    }
    FILE *p = fopen("/proc/self/status", "r");                CHECK(p);
    CHECK(fread(buf, 1, 100, p) > 0);
    fclose(p);
    int z = open("/dev/zero", O_RDONLY);                      CHECK(z >= 0);
    CHECK(read(z, buf, 10) == 10);
    close(z);
    return 0;
}
"#;

const IO_IN_EVENTS: [&str; 11] = [
    "open", "write", "pread", "close", "openat", "read", "close", "fopen", "fread", "fclose",
    "stat",
];

#[test]
fn files_outside_data_dir_and_sibling_prefixes_are_not_traced() {
    let s = Scratch::new("outside");
    let exe = s.compile("io", &prog(IO_IN));
    ok(s.cmd(&exe, Some(&s.s("data")))
        .args([s.path("other"), s.path("data2"), s.path("data")])
        .output()
        .unwrap());
    let t = s.only_trace();
    assert_eq!(
        t.names(),
        IO_IN_EVENTS,
        "only the data/ file, never data2/ other/ /proc /dev"
    );
    let paths: Vec<String> = t.files().into_values().collect();
    for p in &paths {
        assert!(
            !p.contains("data2")
                && !p.contains("other")
                && !p.starts_with("/proc")
                && !p.starts_with("/dev"),
            "{p}"
        );
    }
    for e in t.io() {
        assert_eq!(t.file_of(e), s.s("data/x.bin"));
    }
}

#[test]
fn relative_paths_inside_data_dir_are_traced_normalised() {
    let s = Scratch::new("relative");
    let exe = s.compile("io", &prog(IO_IN));
    std::fs::create_dir_all(s.path("data/sub")).unwrap();
    // DATA_DIR itself given with a trailing slash and a `.` component.
    let dd = format!("{}/./", s.s("data"));
    ok(s.cmd(&exe, Some(&dd))
        .args(["data/sub/../sub", "./other", "data2"])
        .output()
        .unwrap());
    let t = s.only_trace();
    assert_eq!(t.names(), IO_IN_EVENTS);
    for e in t.io() {
        assert_eq!(t.file_of(e), s.s("data/sub/x.bin"));
    }
}

#[test]
fn several_data_dirs_and_all() {
    let s = Scratch::new("dirs");
    let exe = s.compile("io", &prog(IO_IN));
    let two = format!("{}:{}", s.s("data"), s.s("other"));
    ok(s.cmd(&exe, Some(&two))
        .args([s.path("data"), s.path("data2"), s.path("other")])
        .output()
        .unwrap());
    let t = s.only_trace();
    assert_eq!(t.names().len(), 2 * IO_IN_EVENTS.len());
    std::fs::remove_file(&t.path).unwrap();
    // `all` (and unset, our documented default) trace every file except /proc, /sys, /dev.
    for dd in [Some("all"), None] {
        ok(s.cmd(&exe, dd).args([s.path("data2")]).output().unwrap());
        let t = s.only_trace();
        let data2: Vec<&J> = t
            .io()
            .into_iter()
            .filter(|e| t.file_of(e) == s.s("data2/x.bin"))
            .collect();
        assert_eq!(data2.len(), IO_IN_EVENTS.len(), "{dd:?}");
        for p in t.files().values() {
            assert!(
                !p.starts_with("/proc") && !p.starts_with("/dev") && !p.ends_with(".pfw.gz"),
                "{p}"
            );
        }
        std::fs::remove_file(&t.path).unwrap();
    }
}

// ---------------------------------------------------------------- errno and returns

const ERRNO: &str = r#"
int main(int argc, char **argv) {
    char buf[16], f[600];
    snprintf(f, sizeof f, "%s/missing/nope", argv[1]);
    errno = 0;
    int fd = open(f, O_RDONLY);
    CHECK(fd == -1 && errno == ENOENT);
    snprintf(f, sizeof f, "%s/exists", argv[1]);
    fd = open(f, O_CREAT | O_WRONLY, 0600); CHECK(fd >= 0); close(fd);
    errno = 0;
    CHECK(open(f, O_CREAT | O_EXCL | O_WRONLY, 0600) == -1 && errno == EEXIST);
    errno = 0;
    CHECK(read(12345, buf, 1) == -1 && errno == EBADF);
    errno = 0;
    CHECK(pread(-1, buf, 1, 0) == -1 && errno == EBADF);
    errno = 0;
    CHECK(close(54321) == -1 && errno == EBADF);
    fd = open(f, O_RDONLY); CHECK(fd >= 0);
    errno = 0;
    CHECK(write(fd, "x", 1) == -1 && errno == EBADF);   /* traced fd, failing call */
    errno = 0;
    CHECK(lseek(fd, -10, SEEK_SET) == -1 && errno == EINVAL);
    errno = 777;                                       /* success leaves errno alone */
    CHECK(read(fd, buf, 1) == 0 && errno == 777);
    close(fd);
    errno = 0;
    CHECK(fopen(argv[1], "r+") == NULL && errno == EISDIR);
    errno = 0;
    struct stat st;
    CHECK(stat(f, &st) == 0);
    CHECK(unlink(f) == 0 && unlink(f) == -1 && errno == ENOENT);
    puts("errno ok");
    return 0;
}
"#;

#[test]
fn errno_and_return_values_are_preserved() {
    let s = Scratch::new("errno");
    let exe = s.compile("errno", &prog(ERRNO));
    let out = ok(s
        .cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data"))
        .output()
        .unwrap());
    assert_eq!(out, "errno ok\n");
    let t = s.only_trace();
    let ev = t.io();
    assert_eq!(ev[0]["name"], "open");
    assert_eq!(
        ev[0]["args"]["ret"], -1,
        "a failing open is recorded with ret -1"
    );
    let w = ev.iter().find(|e| e["name"] == "write").unwrap();
    assert_eq!(w["args"]["ret"], -1);
    let l = ev.iter().find(|e| e["name"] == "lseek").unwrap();
    assert_eq!(l["args"]["ret"], -1);
    // the same program without the preload behaves the same
    let plain = Command::new(&exe).arg(s.path("data")).output().unwrap();
    assert_eq!(ok(plain), "errno ok\n");
}

// ---------------------------------------------------------------- exec

const EXEC: &str = r#"
int main(int argc, char **argv) {
    char f[600];
    snprintf(f, sizeof f, "%s/before-exec", argv[2]);
    int fd = open(f, O_CREAT | O_WRONLY, 0600); CHECK(fd >= 0);
    CHECK(write(fd, "x", 1) == 1);
    close(fd);
    fflush(stdout);
    if (!strcmp(argv[1], "execl"))
        execl("/bin/echo", "echo", "ARG_OK_execl", "two words", "", "4", "5", "6", "7", "8", "9", "10", (char *)NULL);
    else if (!strcmp(argv[1], "execlp"))
        execlp("echo", "echo", "ARG_OK_execlp", "a", (char *)NULL);
    else if (!strcmp(argv[1], "execle")) {
        char *env[] = {"ONLY=yes", NULL};
        execle("/usr/bin/env", "env", (char *)NULL, env);
    } else if (!strcmp(argv[1], "execv")) {
        char *av[] = {"echo", "ARG_OK_execv", NULL};
        execv("/bin/echo", av);
    } else if (!strcmp(argv[1], "execvp")) {
        char *av[] = {"echo", "ARG_OK_execvp", NULL};
        execvp("echo", av);
    } else if (!strcmp(argv[1], "bad")) {
        errno = 0;
        int r = execl("/nonexistent/prog", "prog", "a", (char *)NULL);
        printf("ret %d errno %d\n", r, errno);
        return 0;
    }
    perror("exec");
    return 1;
}
"#;

#[test]
fn exec_children_get_exactly_their_arguments() {
    let s = Scratch::new("exec");
    let exe = s.compile("exec", &prog(EXEC));
    let cases = [
        ("execl", "ARG_OK_execl two words  4 5 6 7 8 9 10\n"),
        ("execlp", "ARG_OK_execlp a\n"),
        ("execle", "ONLY=yes\n"),
        ("execv", "ARG_OK_execv\n"),
        ("execvp", "ARG_OK_execvp\n"),
        ("bad", "ret -1 errno 2\n"),
    ];
    for (how, want) in cases {
        let out = ok(s
            .cmd(&exe, Some(&s.s("data")))
            .args([how, &s.s("data")])
            .output()
            .unwrap());
        assert_eq!(out, want, "{how}");
        // The parent's trace was finished before the image was replaced: `end` is last.
        let t = s.only_trace();
        assert_eq!(t.lines.last().unwrap()["name"], "end", "{how}");
        assert_eq!(
            t.names(),
            ["open", "write", "close"],
            "{how}: programs outside DATA_DIR make no exec event"
        );
        std::fs::remove_file(&t.path).unwrap();
    }
    // With every file traced, the exec itself is an event naming the program.
    let out = ok(s
        .cmd(&exe, Some("all"))
        .args(["execl", &s.s("data")])
        .output()
        .unwrap());
    assert_eq!(out, "ARG_OK_execl two words  4 5 6 7 8 9 10\n");
    let t = s.only_trace();
    let ex = t
        .io()
        .into_iter()
        .find(|e| e["name"] == "execl")
        .expect("execl event");
    assert_eq!(ex["args"]["argc"], 11);
    assert_eq!(t.file_of(ex), "/bin/echo");
}

// ---------------------------------------------------------------- fork, threads, exit paths

const FORK: &str = r#"
int main(int argc, char **argv) {
    char f[600], buf[64];
    snprintf(f, sizeof f, "%s/shared.bin", argv[1]);
    int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644); CHECK(fd >= 0);
    CHECK(write(fd, "0123456789", 10) == 10);
    for (int k = 0; k < 2; k++) {
        pid_t p = fork();
        CHECK(p >= 0);
        if (p == 0) {
            for (int i = 0; i < 5 + k; i++) CHECK(pread(fd, buf, 4, i) == 4);  /* inherited fd */
            char g[600];
            snprintf(g, sizeof g, "%s/child%d", argv[1], k);
            int c = open(g, O_CREAT | O_WRONLY, 0644); CHECK(c >= 0); close(c);
            if (k == 0) exit(0); else _exit(0);
        }
        int st; CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK(pread(fd, buf, 2, 0) == 2);
    close(fd);
    return 0;
}
"#;

#[test]
fn fork_children_write_their_own_self_contained_files() {
    let s = Scratch::new("fork");
    let exe = s.compile("fork", &prog(FORK));
    ok(s.cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data"))
        .output()
        .unwrap());
    let files = s.traces();
    assert_eq!(files.len(), 3, "{files:?}");
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let forks: Vec<&PathBuf> = files.iter().filter(|p| name(p).contains("-fork")).collect();
    assert_eq!(forks.len(), 2, "{files:?}");
    let mut pids = std::collections::HashSet::new();
    let mut preads = vec![];
    for p in &forks {
        let t = Trace::read(p);
        // self-contained: its own HH, FH (for every fhash it uses), start and end
        assert!(t.lines.iter().any(|l| l["name"] == "HH"));
        assert!(t.lines.iter().any(|l| l["name"] == "start"));
        assert!(t.has_end(), "{}: child exit finalizes", p.display());
        for e in t.io() {
            t.file_of(e);
            pids.insert(e["pid"].as_u64().unwrap());
        }
        let n = t.names().iter().filter(|n| *n == "pread").count();
        preads.push(n);
        assert!(t.names().contains(&"open".to_string()));
    }
    preads.sort();
    assert_eq!(preads, [5, 6], "each child's inherited fd is still traced");
    assert_eq!(pids.len(), 2);
    let parent = files.iter().find(|p| name(p).contains("-preload")).unwrap();
    let t = Trace::read(parent);
    assert_eq!(
        t.names(),
        ["open", "write", "fork", "waitpid", "fork", "waitpid", "pread", "close"],
        "children's events are not in the parent"
    );
    // the parent's fork events name the children (ret = child pid), and waitpid reaped them
    let forked: std::collections::HashSet<u64> = t
        .io()
        .iter()
        .filter(|e| e["name"] == "fork")
        .map(|e| e["args"]["ret"].as_u64().unwrap())
        .collect();
    assert_eq!(forked, pids, "fork ret = the pid in each child's file");
    for w in t.io().iter().filter(|e| e["name"] == "waitpid") {
        assert!(forked.contains(&w["args"]["ret"].as_u64().unwrap()));
        assert_eq!(w["args"]["status"], 0);
    }
}

/// Forks a child that sleeps 150 ms and exits 3, waits for it, and runs `/bin/true` through
/// `system`; touches no file under the data dir.
const LAUNCHER: &str = r#"
int main(void) {
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) { usleep(150 * 1000); _exit(3); }
    int st; CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 3);
    CHECK(system("/bin/true") == 0);
    printf("%d\n", (int)p);
    return 0;
}
"#;

/// A process that only forks and waits (no data-dir I/O) has its process calls recorded, as
/// the reference records them; each is `cat` POSIX with `dur` 0 (dfanalyzer and
/// dftracer-utils sum every POSIX `dur` as I/O time) and its real length in `args.call_dur`
/// (FORMAT.md "Process calls"; `dftracer perfetto` draws it: frontends/cli/tests/cli.rs).
#[test]
fn process_calls_are_recorded_without_data_dir_io_and_add_no_io_time() {
    let s = Scratch::new("launcher");
    let exe = s.compile("launcher", &prog(LAUNCHER));
    let out = s
        .cmd(&exe, Some(&s.s("data")))
        .env("DFTRACER_TIME_METRIC", "US")
        .output()
        .unwrap();
    let child: i64 = ok(out).trim().parse().unwrap();
    // The launcher's file (the shell that `system` runs has one too: it forks /bin/true).
    let files = s.traces();
    let t = files
        .iter()
        .map(|p| Trace::read(p))
        .find(|t| t.lines.iter().any(|l| l["name"] == "fork"))
        .unwrap_or_else(|| panic!("the launcher's own file: {files:?}"));
    let ev = t.io();
    let names: Vec<&str> = ev.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fork", "waitpid", "system"], "{names:?}");
    for e in &ev {
        assert_eq!(e["cat"], "POSIX", "{e}");
        assert_eq!(e["dur"], 0, "{e}: no I/O time");
    }
    let call = |name: &str| {
        let e = ev.iter().find(|e| e["name"] == name).unwrap();
        e["args"]["call_dur"]
            .as_u64()
            .unwrap_or_else(|| panic!("{e}: call_dur"))
    };
    assert_eq!(ev[0]["args"]["ret"], child);
    assert_eq!(ev[1]["args"]["ret"], child);
    assert_eq!(ev[1]["args"]["status"], 3 << 8);
    // The wait covered the child's 150 ms sleep; the fork of this small program did not.
    assert!(
        call("waitpid") >= 100_000,
        "waitpid call_dur {}",
        call("waitpid")
    );
    assert!(call("fork") < 100_000, "fork call_dur {}", call("fork"));
}

const THREADS: &str = r#"
static int fd;
static void *work(void *arg) {
    char buf[64];
    for (int i = 0; i < 100000; i++) if (pread(fd, buf, 8, i % 100) != 8) abort();
    return NULL;
}
int main(int argc, char **argv) {
    char f[600];
    snprintf(f, sizeof f, "%s/t.bin", argv[1]);
    fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644); CHECK(fd >= 0);
    char z[256] = {0};
    CHECK(write(fd, z, sizeof z) == sizeof z);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    close(fd);
    return 0;
}
"#;

#[test]
fn eight_threads_times_100k_preads_exact_count() {
    let s = Scratch::new("threads");
    let exe = s.compile("threads", &prog(THREADS));
    ok(s.cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data"))
        .env("DFTRACER_INC_METADATA", "0")
        .output()
        .unwrap());
    let t = s.only_trace();
    let mut per_tid: HashMap<u64, usize> = HashMap::new();
    let mut n = 0;
    for e in t.io() {
        if e["name"] == "pread" {
            n += 1;
            *per_tid.entry(e["tid"].as_u64().unwrap()).or_default() += 1;
        }
    }
    assert_eq!(n, 800_000);
    assert_eq!(per_tid.len(), 8);
    assert!(per_tid.values().all(|&c| c == 100_000), "{per_tid:?}");
    let end = t.lines.iter().find(|l| l["name"] == "end").unwrap();
    assert!(end.get("args").is_none() || end["args"]["dropped"] == 0);
}

const EXIT: &str = r#"
int main(int argc, char **argv) {
    char f[600], buf[8];
    snprintf(f, sizeof f, "%s/e.bin", argv[1]);
    int fd = open(f, O_CREAT | O_RDWR, 0644); CHECK(fd >= 0);
    CHECK(write(fd, "abc", 3) == 3);
    CHECK(pread(fd, buf, 3, 0) == 3);
    if (!strcmp(argv[2], "_exit")) _exit(3);
    if (!strcmp(argv[2], "_Exit")) _Exit(4);
    if (!strcmp(argv[2], "wait")) {
        puts("ready"); fflush(stdout);
        for (;;) pause();
    }
    return 0;
}
"#;

#[test]
fn underscore_exit_flushes_and_keeps_the_status() {
    let s = Scratch::new("exit");
    let exe = s.compile("exit", &prog(EXIT));
    for (how, code) in [("_exit", 3), ("_Exit", 4)] {
        let out = s
            .cmd(&exe, Some(&s.s("data")))
            .args([&s.s("data"), how])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code));
        let t = s.only_trace();
        assert_eq!(t.names(), ["open", "write", "pread"], "{how}");
        assert!(t.has_end(), "{how} finalizes");
        std::fs::remove_file(&t.path).unwrap();
    }
}

#[test]
fn sigkill_after_a_flush_interval_leaves_a_readable_file() {
    let s = Scratch::new("kill");
    let exe = s.compile("exit", &prog(EXIT));
    let mut child = spawn_ready(
        s.cmd(&exe, Some(&s.s("data")))
            .args([&s.s("data"), "wait"])
            .env("DFTRACER_FLUSH_INTERVAL_MS", "200"),
    );
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    let t = s.only_trace();
    assert_eq!(t.names(), ["open", "write", "pread"]);
    assert!(
        !t.has_end(),
        "killed: no end record, but every written member is whole"
    );
}

#[test]
fn tracing_off_makes_no_file_and_changes_nothing() {
    let s = Scratch::new("off");
    let exe = s.compile("errno", &prog(ERRNO));
    for (enable, init) in [("0", "PRELOAD"), ("1", "FUNCTION"), ("1", "NONE")] {
        let out = s
            .cmd(&exe, Some(&s.s("data")))
            .arg(s.path("data"))
            .env("DFTRACER_ENABLE", enable)
            .env("DFTRACER_INIT", init)
            .output()
            .unwrap();
        assert_eq!(ok(out), "errno ok\n");
        assert!(
            s.traces().is_empty(),
            "ENABLE={enable} INIT={init}: no file"
        );
    }
    // Tracing on but nothing under DATA_DIR touched: still no (empty) file.
    let out = s
        .cmd(&exe, Some(&s.s("other")))
        .arg(s.path("data"))
        .output()
        .unwrap();
    assert_eq!(ok(out), "errno ok\n");
    assert!(s.traces().is_empty(), "no event, no file");
}

// ---------------------------------------------------------------- fds beyond 1024

const HIGH_FD: &str = r#"
int main(int argc, char **argv) {
    struct rlimit rl = {8192, 8192};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) { puts("skip"); return 0; }
    char f[600], buf[8];
    snprintf(f, sizeof f, "%s/h.bin", argv[1]);
    int fd = open(f, O_CREAT | O_RDWR, 0644); CHECK(fd >= 0);
    CHECK(write(fd, "abcdefgh", 8) == 8);
    CHECK(dup2(fd, 5000) == 5000);
    CHECK(dup2(fd, 1024 + fd) == 1024 + fd);   /* would alias fd in a 1024-slot table */
    close(fd);
    CHECK(pread(5000, buf, 4, 0) == 4);
    close(5000);
    int o = open(argv[2], O_RDONLY);  CHECK(o >= 0);  /* untraced file */
    CHECK(dup2(o, 1024 + fd) == 1024 + fd);           /* replaces the traced copy */
    CHECK(read(1024 + fd, buf, 1) >= 0);
    puts("ok");
    return 0;
}
"#;

#[test]
fn fds_beyond_1024_are_tracked_without_aliasing() {
    let s = Scratch::new("highfd");
    let exe = s.compile("highfd", &prog(HIGH_FD));
    std::fs::write(s.path("other/o.txt"), "x").unwrap();
    let out = ok(s
        .cmd(&exe, Some(&s.s("data")))
        .args([s.s("data"), s.s("other/o.txt")])
        .output()
        .unwrap());
    if out == "skip\n" {
        return;
    }
    let t = s.only_trace();
    assert_eq!(
        t.names(),
        ["open", "write", "dup2", "dup2", "close", "pread", "close"]
    );
    assert_eq!(t.io()[5]["args"]["fd"], 5000);
}

// ---------------------------------------------------------------- python

#[test]
fn python_reads_under_the_preload() {
    let s = Scratch::new("python");
    std::fs::write(s.path("data/sample.txt"), "hello dataset\n".repeat(100)).unwrap();
    let script = r#"
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "sample.txt"), "rb") as f:
    n = len(f.read())
os.stat(os.path.join(d, "sample.txt"))
with open(os.path.join(d, "out.txt"), "w") as f:
    f.write("x" * 10)
print(n, sorted(os.listdir(d)))
"#;
    // The real interpreter, not a launcher script (pyenv shims are shell scripts).
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = ok(exe).trim().to_string();
    let out = ok(s
        .cmd(&python, Some(&s.s("data")))
        .args(["-c", script, &s.s("data")])
        .output()
        .unwrap());
    assert_eq!(out, "1400 ['out.txt', 'sample.txt']\n");
    let t = s.only_trace();
    let ev = t.io();
    let reads: Vec<&&J> = ev
        .iter()
        .filter(|e| e["name"] == "read" && t.file_of(e) == s.s("data/sample.txt"))
        .collect();
    assert!(!reads.is_empty(), "{:?}", t.names());
    let total: i64 = reads
        .iter()
        .map(|e| e["args"]["ret"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 1400, "every byte read is accounted for");
    assert!(ev
        .iter()
        .any(|e| e["name"] == "write" && t.file_of(e) == s.s("data/out.txt")));
    assert!(ev.iter().any(|e| e["name"] == "opendir"));
    assert!(ev
        .iter()
        .any(|e| e["name"].as_str().unwrap().starts_with("open")
            && e["args"]["ret"].as_i64().unwrap() >= 0));
    for p in t.files().values() {
        assert!(
            p.starts_with(&s.s("data")) || Path::new(p) == s.dir,
            "only data files: {p}"
        );
    }
}

// ---------------------------------------------------------------- issue 12: more calls

const MORE_CALLS: &str = r#"
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <utime.h>
#include <spawn.h>
#include <limits.h>
extern char **environ;
int main(int argc, char **argv) {
    const char *d = argv[1];
    char f[512], g[512], h[512], l[512], buf[8192], out[PATH_MAX];
    memset(buf, 'b', sizeof buf);
    snprintf(f, sizeof f, "%s/f.bin", d);
    snprintf(g, sizeof g, "%s/g.bin", d);
    snprintf(h, sizeof h, "%s/h.bin", d);
    snprintf(l, sizeof l, "%s/l.lnk", d);
    int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644);                   CHECK(fd >= 0);
    CHECK(write(fd, buf, 8192) == 8192);
    CHECK(flock(fd, LOCK_EX) == 0 && flock(fd, LOCK_UN) == 0);
    CHECK(posix_fadvise(fd, 0, 4096, POSIX_FADV_SEQUENTIAL) == 0);
    CHECK(posix_fallocate(fd, 0, 16384) == 0);
    CHECK(fallocate(fd, 0, 0, 16384) == 0);
    CHECK(fchmod(fd, 0640) == 0);
    CHECK(fchown(fd, getuid(), getgid()) == 0);
    struct statvfs sv;
    CHECK(fstatvfs(fd, &sv) == 0);
    int o = open(g, O_CREAT | O_WRONLY | O_TRUNC, 0644);                  CHECK(o >= 0);
    loff_t oi = 0;
    CHECK(copy_file_range(fd, &oi, o, NULL, 5000, 0) == 5000 && oi == 5000);
    off_t so = 100;
    CHECK(sendfile(o, fd, &so, 1000) == 1000 && so == 1100);
    int p[2]; CHECK(pipe(p) == 0);
    CHECK(splice(fd, &oi, p[1], NULL, 300, 0) == 300);
    CHECK(close(p[0]) == 0 && close(p[1]) == 0);
    CHECK(close(o) == 0);
    void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);  CHECK(m != MAP_FAILED);
    ((char *)m)[0] = 'x';
    CHECK(msync(m, 4096, MS_SYNC) == 0);
    CHECK(munmap(m, 8192) == 0);
    CHECK(close(fd) == 0);
    /* paths */
    CHECK(link(f, h) == 0);
    CHECK(symlink("f.bin", l) == 0);
    CHECK(readlink(l, out, sizeof out) == 5);
    CHECK(realpath(l, out) != NULL && strcmp(out, f) == 0);
    CHECK(chmod(f, 0600) == 0);
    CHECK(chown(f, getuid(), getgid()) == 0 && lchown(l, getuid(), getgid()) == 0);
    CHECK(utime(f, NULL) == 0 && utimes(f, NULL) == 0);
    CHECK(utimensat(AT_FDCWD, f, NULL, 0) == 0);
    CHECK(truncate(h, 100) == 0);
    CHECK(statvfs(d, &sv) == 0);
    char fifo[600]; snprintf(fifo, sizeof fifo, "%s/fifo", d);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(remove(fifo) == 0);
    CHECK(remove(l) == 0);
    mode_t old = umask(027);
    CHECK(umask(old) == 027);
    errno = 0;
    CHECK(readlink(f, out, sizeof out) == -1 && errno == EINVAL);  /* not a link */
    /* directories, chdir and relative paths */
    DIR *D = opendir(d);                                                 CHECK(D);
    int dfd = dirfd(D);                                                  CHECK(dfd >= 0);
    int n = 0;
    while (readdir(D)) n++;
    CHECK(n == 5);   /* . .. f.bin g.bin h.bin */
    CHECK(closedir(D) == 0);
    CHECK(chdir(d) == 0);
    fd = open("g.bin", O_RDONLY);                                        CHECK(fd >= 0);
    CHECK(read(fd, buf, 10) == 10);
    CHECK(close(fd) == 0);
    CHECK(chdir("/") == 0);
    /* stdio */
    FILE *F = fopen(h, "w+");                                            CHECK(F);
    CHECK(setvbuf(F, NULL, _IOFBF, 4096) == 0);
    CHECK(fputc('a', F) == 'a' && putc('b', F) == 'b');
    CHECK(fprintf(F, "%d %s %.2f %d %d %d %d %ld %.1f\n", 1, "two", 3.0, 4, 5, 6, 7, 8L, 9.5) == 25);
    CHECK(fileno(F) >= 0);
    rewind(F);
    CHECK(fgetc(F) == 'a' && getc(F) == 'b');
    CHECK(ungetc('b', F) == 'b' && getc(F) == 'b');
    int i1, i4, i5; char w[16]; double d3;
    CHECK(fscanf(F, "%d %15s %lf %d %d", &i1, w, &d3, &i4, &i5) == 5);
    CHECK(i1 == 1 && !strcmp(w, "two") && d3 == 3.0 && i4 == 4 && i5 == 5);
    fpos_t pos;
    CHECK(fgetpos(F, &pos) == 0 && fsetpos(F, &pos) == 0);
    rewind(F);
    char *line = NULL; size_t cap = 0;
    CHECK(getline(&line, &cap, F) == 27);
    CHECK(getdelim(&line, &cap, 'x', F) == -1 && feof(F) && !ferror(F));
    clearerr(F);
    free(line);
    CHECK(freopen(g, "r", F) == F);
    CHECK(fread(buf, 1, 10, F) == 10);
    CHECK(fclose(F) == 0);
    /* processes */
    pid_t c = fork();
    if (c == 0) _exit(7);
    int st;
    CHECK(waitpid(c, &st, 0) == c && WEXITSTATUS(st) == 7);
    c = vfork();
    if (c == 0) { char *av[] = {"true", NULL}; execv("/bin/true", av); _exit(127); }
    CHECK(c > 0 && wait(&st) == c && WEXITSTATUS(st) == 0);
    pid_t sp;
    char *av[] = {"true", NULL};
    CHECK(posix_spawn(&sp, "/bin/true", NULL, NULL, av, environ) == 0);
    CHECK(waitpid(sp, &st, 0) == sp);
    CHECK(system("exit 3") != -1);
    FILE *P = popen("echo hi", "r");                                     CHECK(P);
    CHECK(fgets(buf, sizeof buf, P) != NULL);
    CHECK(pclose(P) == 0);
    printf("done %d\n", sp);
    return 0;
}
"#;

#[test]
fn issue12_calls_record_the_right_events() {
    let s = Scratch::new("more");
    let exe = s.compile("more", &prog(MORE_CALLS));
    let out = ok(s
        .cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data"))
        .output()
        .unwrap());
    assert!(out.starts_with("done "), "{out}");
    let spawned: i64 = out.trim()["done ".len()..].parse().unwrap();
    // The children (fork: own -fork file; /bin/true, sh, echo: nothing traced) leave at most
    // the fork child's file, which has no I/O.
    let parent = s
        .traces()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("-preload"))
        .expect("parent trace");
    let t = Trace::read(&parent);
    let names = t.names();
    let expected = [
        "open",
        "write",
        "flock",
        "flock",
        "posix_fadvise",
        "posix_fallocate",
        "fallocate",
        "fchmod",
        "fchown",
        "fstatvfs",
        "open",
        "copy_file_range",
        "sendfile",
        "splice",
        "close",
        "mmap",
        "msync",
        "munmap",
        "close",
        "link",
        "symlink",
        "readlink",
        "realpath",
        "chmod",
        "chown",
        "lchown",
        "utime",
        "utimes",
        "utimensat",
        "truncate",
        "statvfs",
        "mkfifo",
        "remove",
        "remove",
        "umask",
        "umask",
        "readlink",
        "opendir",
        "dirfd",
        "readdir",
        "readdir",
        "readdir",
        "readdir",
        "readdir",
        "readdir",
        "closedir",
        "chdir",
        "open",
        "read",
        "close",
        "fopen",
        "setvbuf",
        "fputc",
        "putc",
        "fprintf",
        "fileno",
        "rewind",
        "fgetc",
        "getc",
        "ungetc",
        "getc",
        "fscanf",
        "fgetpos",
        "fsetpos",
        "rewind",
        // glibc's <stdio.h> inlines getline into __getdelim(..., '\n', ...) when optimising
        "getdelim",
        "getdelim",
        "feof",
        "ferror",
        "clearerr",
        "freopen",
        "fread",
        "fclose",
        "fork",
        "waitpid",
        "vfork",
        "wait",
        "posix_spawn",
        "waitpid",
        "system",
        "popen",
        "pclose",
    ];
    assert_eq!(names, expected, "event sequence");
    let ev = t.io();
    let by = |name: &str, k: usize| -> &J {
        ev.iter()
            .filter(|e| e["name"] == name)
            .nth(k)
            .unwrap_or_else(|| panic!("{name} #{k}"))
    };
    let (f, g) = (s.s("data/f.bin"), s.s("data/g.bin"));
    // copies: one event, both files named, every byte once
    let c = by("copy_file_range", 0);
    assert_eq!(
        (
            &c["args"]["count"],
            &c["args"]["ret"],
            &c["args"]["offset_in"]
        ),
        (&J::from(5000), &J::from(5000), &J::from(0))
    );
    assert_eq!(t.file_of(c), f);
    assert_eq!(t.files()[c["args"]["out_fhash"].as_str().unwrap()], g);
    let sf = by("sendfile", 0);
    assert_eq!(
        (&sf["args"]["ret"], &sf["args"]["offset_in"]),
        (&J::from(1000), &J::from(100))
    );
    let sp = by("splice", 0);
    assert_eq!(sp["args"]["ret"], 300);
    assert_eq!(t.file_of(sp), f);
    assert!(
        sp["args"].get("out_fhash").is_none(),
        "the pipe is not a traced file"
    );
    assert_eq!(by("msync", 0)["args"]["length"], 4096);
    assert_eq!(t.file_of(by("munmap", 0)), f);
    assert_eq!(by("posix_fallocate", 0)["args"]["length"], 16384);
    // paths
    let lk = by("link", 0);
    assert_eq!(t.file_of(lk), f);
    assert_eq!(
        t.files()[lk["args"]["newpath_hash"].as_str().unwrap()],
        s.s("data/h.bin")
    );
    let sy = by("symlink", 0);
    assert_eq!(
        (t.file_of(sy), &sy["args"]["target"]),
        (s.s("data/l.lnk"), &J::from("f.bin"))
    );
    assert_eq!(by("readlink", 0)["args"]["ret"], 5);
    assert_eq!(by("readlink", 1)["args"]["ret"], -1);
    assert_eq!(by("truncate", 0)["args"]["length"], 100);
    assert_eq!(by("chmod", 0)["args"]["mode"], 0o600);
    let um = by("umask", 1);
    assert_eq!(
        (&um["args"]["mask"], &um["args"]["ret"]),
        (&J::from(0o22), &J::from(0o27))
    );
    assert!(um["args"].get("fhash").is_none(), "umask names no file");
    assert_eq!(t.file_of(by("mkfifo", 0)), s.s("data/fifo"));
    // directories; the relative open after chdir resolves to the data dir
    assert_eq!(
        by("dirfd", 0)["args"]["ret"],
        by("opendir", 0)["args"]["fd"]
    );
    assert_eq!(by("readdir", 4)["args"]["ret"], 1);
    assert_eq!(by("readdir", 5)["args"]["ret"], 0);
    assert_eq!(t.file_of(by("chdir", 0)), s.s("data"));
    assert_eq!(t.file_of(by("open", 2)), g);
    assert_eq!(by("read", 0)["args"]["ret"], 10);
    // stdio
    assert_eq!(by("fprintf", 0)["args"]["ret"], 25);
    assert_eq!(by("fprintf", 0)["cat"], "STDIO");
    assert_eq!(by("fscanf", 0)["args"]["ret"], 5);
    assert_eq!(by("getdelim", 0)["args"]["ret"], 27);
    assert_eq!(by("getdelim", 0)["args"]["delim"], b'\n' as i64);
    assert_eq!(by("getdelim", 1)["args"]["ret"], -1);
    assert!(by("feof", 0)["args"]["ret"].as_i64().unwrap() != 0);
    let fr = by("freopen", 0);
    assert_eq!(
        (t.file_of(fr), &fr["args"]["mode"]),
        (g.clone(), &J::from("r"))
    );
    assert_eq!(
        t.file_of(by("fread", 0)),
        g,
        "the reopened stream names the new file"
    );
    // processes: children's pids
    let fork_pid = by("fork", 0)["args"]["ret"].as_i64().unwrap();
    assert!(fork_pid > 0);
    assert_eq!(by("waitpid", 0)["args"]["ret"], fork_pid);
    assert_eq!(by("waitpid", 0)["args"]["status"], 7 << 8);
    let vf = by("vfork", 0)["args"]["ret"].as_i64().unwrap();
    assert!(vf > 0 && vf != fork_pid);
    assert_eq!(by("wait", 0)["args"]["ret"], vf);
    let ps = by("posix_spawn", 0);
    assert_eq!(
        (&ps["args"]["pid"], &ps["args"]["ret"]),
        (&J::from(spawned), &J::from(0))
    );
    assert_eq!(t.file_of(ps), "/bin/true");
    let sy = by("system", 0);
    assert_eq!(
        (&sy["args"]["command"], &sy["args"]["ret"]),
        (&J::from("exit 3"), &J::from(3 << 8))
    );
    assert_eq!(by("popen", 0)["args"]["command"], "echo hi");
    assert_eq!(by("pclose", 0)["args"]["ret"], 0);
    // the same program without the preload behaves the same
    std::fs::remove_dir_all(s.path("data")).unwrap();
    std::fs::create_dir_all(s.path("data")).unwrap();
    let plain = ok(Command::new(&exe).arg(s.path("data")).output().unwrap());
    assert!(plain.starts_with("done "));
}

// ---------------------------------------------------------------- POSIX AIO

const AIO: &str = r#"
#include <aio.h>
int main(int argc, char **argv) {
    char f[600], buf[3][4096];
    snprintf(f, sizeof f, "%s/aio.bin", argv[1]);
    int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644);                  CHECK(fd >= 0);
    memset(buf[0], 'w', 4096);
    struct aiocb w = {0};
    w.aio_fildes = fd; w.aio_buf = buf[0]; w.aio_nbytes = 4096; w.aio_offset = 8192;
    CHECK(aio_write(&w) == 0);
    const struct aiocb *l1[1] = {&w};
    while (aio_error(&w) == EINPROGRESS) CHECK(aio_suspend(l1, 1, NULL) == 0);
    CHECK(aio_return(&w) == 4096);
    struct aiocb r = {0};
    r.aio_fildes = fd; r.aio_buf = buf[1]; r.aio_nbytes = 100; r.aio_offset = 8200;
    CHECK(aio_read(&r) == 0);
    while (aio_error(&r) == EINPROGRESS) usleep(100);
    CHECK(aio_return(&r) == 100 && buf[1][0] == 'w');
    struct aiocb a = {0}, b = {0};
    a.aio_fildes = fd; a.aio_buf = buf[1]; a.aio_nbytes = 10; a.aio_offset = 0; a.aio_lio_opcode = LIO_READ;
    b.aio_fildes = fd; b.aio_buf = buf[2]; b.aio_nbytes = 2000; b.aio_offset = 10000; b.aio_lio_opcode = LIO_READ;
    struct aiocb *l2[3] = {&a, NULL, &b};
    CHECK(lio_listio(LIO_WAIT, l2, 3, NULL) == 0);
    CHECK(aio_return(&a) == 10 && aio_return(&b) == 2000);
    errno = 0;
    struct aiocb bad = {0};
    bad.aio_fildes = 9999; bad.aio_buf = buf[1]; bad.aio_nbytes = 1;
    int q = aio_read(&bad);
    if (q == 0) { while (aio_error(&bad) == EINPROGRESS) usleep(100); CHECK(aio_return(&bad) == -1); }
    else CHECK(errno == EBADF);
    CHECK(close(fd) == 0);
    puts("aio ok");
    return 0;
}
"#;

#[test]
fn posix_aio_records_one_event_per_request() {
    let s = Scratch::new("aio");
    let exe = s.compile("aio", &prog(AIO));
    let out = ok(s
        .cmd(&exe, Some(&s.s("data")))
        .arg(s.path("data"))
        .output()
        .unwrap());
    assert_eq!(out, "aio ok\n");
    let t = s.only_trace();
    let ev = t.io();
    let aio: Vec<&&J> = ev
        .iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("aio_"))
        .collect();
    let got: Vec<(String, i64, i64, i64)> = aio
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["args"]["count"].as_i64().unwrap(),
                e["args"]["offset"].as_i64().unwrap(),
                e["args"]["ret"].as_i64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("aio_write", 4096, 8192, 4096),
        ("aio_read", 100, 8200, 100),
        ("aio_read", 10, 0, 10),
        ("aio_read", 2000, 10000, 2000),
    ];
    let want: Vec<(String, i64, i64, i64)> = want
        .iter()
        .map(|w| (w.0.to_string(), w.1, w.2, w.3))
        .collect();
    assert_eq!(
        got, want,
        "one event per request, the untraced fd 9999 is not one"
    );
    let fd = ev[0]["args"]["fd"].clone();
    for e in &aio {
        assert_eq!(t.file_of(e), s.s("data/aio.bin"));
        assert_eq!(e["args"]["fd"], fd);
        assert!(
            e["dur"].as_u64().unwrap() > 0,
            "submission to completion: {e}"
        );
    }
}

// ---------------------------------------------------------------- many files

const MANY_FILES: &str = r#"
static long rss_kb(void) {
    char b[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) return -1;
    b[n] = 0;
    char *p = strstr(b, "VmRSS:");
    return p ? atol(p + 6) : -1;
}
/* File i is <d>/l<i / 1000>/f<i % 1000>: every l<k> is a symlink to <d>/real, so the
   paths (normalised lexically by the tracer) are all distinct and every open is real. */
static void one(const char *d, long i) {
    char p[600], buf[16];
    snprintf(p, sizeof p, "%s/l%ld/f%03ld", d, i / 1000, i % 1000);
    int fd = open(p, O_RDONLY);                                       CHECK(fd >= 0);
    CHECK(read(fd, buf, sizeof buf) == 8 && atol(buf) == i % 1000);
    CHECK(close(fd) == 0);
}
int main(int argc, char **argv) {
    const char *d = argv[1];
    long n = atol(argv[2]), every = n / 20;
    char keep[600], buf[16];
    /* One file stays open throughout: its fd's slot is pinned, its FH entry is evicted. */
    snprintf(keep, sizeof keep, "%s/keep", d);
    int kfd = open(keep, O_CREAT | O_RDWR, 0644);                    CHECK(kfd >= 0);
    for (long i = 0; i < n; i++) {
        one(d, i);
        if ((i + 1) % every == 0) { printf("rss %ld %ld\n", i + 1, rss_kb()); fflush(stdout); }
    }
    /* The first file again, long after its slot and FH entry were reused. */
    one(d, 0);
    CHECK(read(kfd, buf, sizeof buf) == 0);
    CHECK(close(kfd) == 0);
    return 0;
}
"#;

/// Opens, reads and closes `DFTRACER_TEST_FILES` distinct files (default 500,000; `make
/// test-many-files` runs 2,000,000) under one traced data dir: 1,000 real files seen through
/// one symlinked directory per 1,000 files (distinct paths, real opens, no millions of
/// inodes to create). Checks that resident memory stays within what
/// the documented table capacities allow after the first 10 %, and that every event names
/// its own file through an `FH` line earlier in the trace, including a file and an open fd
/// whose `FH` entries were evicted long before they were used again.
#[test]
fn millions_of_distinct_files_in_flat_memory() {
    let n: usize = std::env::var("DFTRACER_TEST_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    assert!(
        n >= 200_000,
        "fewer files than 3 table capacities prove nothing"
    );
    assert!(n <= 2_000_000);
    let s = Scratch::new("many");
    let data_s = s.s("data");
    std::fs::create_dir(s.path("data/real")).unwrap();
    for j in 0..1000 {
        std::fs::write(s.path(&format!("data/real/f{j:03}")), format!("{j:<7}\n")).unwrap();
    }
    for k in 0..n.div_ceil(1000) {
        std::os::unix::fs::symlink(s.path("data/real"), s.path(&format!("data/l{k}"))).unwrap();
    }
    let exe = s.compile("many", &prog(MANY_FILES));
    let t0 = std::time::Instant::now();
    let out = s
        .cmd(&exe, Some(&data_s))
        .args([&data_s, &n.to_string()])
        .output()
        .unwrap();
    let out = ok(out);
    let ran = t0.elapsed();
    let rss: Vec<(usize, u64)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("rss ")?.split(' ');
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(rss.len(), 20, "{out}");
    eprintln!("{n} files in {ran:?}; VmRSS kB by files done: {rss:?}");

    // What the tables may add once the process is warm (10 % of the files seen), from their
    // documented capacities, with every allocation counted at twice its size (allocator
    // rounding, vectors and maps growing by doubling). Path length: `<data>/l%ld/f%03ld`.
    let path_len = data_s.len() + 11;
    // The preload's pool: `table::POOL_SLOTS` slots of 64 B, 8 B keys and 1 B tags, a path buffer each.
    let pool = (1 << 17) * (64 + 9 + 2 * (path_len.max(64) + 16));
    // The writer's path table: an entry (48 B), the shared path (16 B counts), a map slot.
    let paths = dftracer_core::frontend::PATHS_CAP * 2 * (48 + (16 + path_len + 16) + 24 + 8);
    let slack = 8 << 20; // allocator arenas and pages touched late (not per file)
    let bound_kb = ((pool + paths + slack) / 1024) as u64;
    let warm = rss[1].1; // after 10 %
    let end = rss[19].1;
    assert!(
        end <= warm + bound_kb,
        "VmRSS grew by {} kB after warm-up, more than the tables' bound {bound_kb} kB",
        end - warm
    );

    // Stream the trace: FH lines define hashes; every LIBC_IO event names, through an FH
    // line earlier in the file, the file the program used at that point.
    let traces = s.traces();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let t1 = std::time::Instant::now();
    let raw = std::fs::File::open(&traces[0]).unwrap();
    let text = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(raw));
    let mut fh: HashMap<String, String> = HashMap::new();
    let mut fh_count: HashMap<String, u32> = HashMap::new();
    let (mut events, mut fh_lines, mut ended) = (0usize, 0usize, false);
    let file = |i: usize| format!("{data_s}/l{}/f{:03}", i / 1000, i % 1000);
    let keep = format!("{data_s}/keep");
    let expect = |k: usize| -> (String, &'static str) {
        const SEQ: [&str; 3] = ["open", "read", "close"];
        match k {
            0 => (keep.clone(), "open"),
            k if k <= 3 * n => (file((k - 1) / 3), SEQ[(k - 1) % 3]),
            k if k <= 3 * n + 3 => (file(0), SEQ[(k - 1) % 3]),
            k => (keep.clone(), ["read", "close"][k - 3 * n - 4]),
        }
    };
    use std::io::BufRead;
    for line in text.split(b'\n') {
        let line = line.unwrap();
        let l: J = serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("bad JSON line {:?}: {e}", String::from_utf8_lossy(&line)));
        if l["ph"] == 4 && l["name"] == "FH" {
            let (h, p) = (
                l["args"]["value"].as_str().unwrap(),
                l["args"]["name"].as_str().unwrap(),
            );
            if let Some(old) = fh.insert(h.to_string(), p.to_string()) {
                assert_eq!(old, p, "one hash, two paths");
            }
            *fh_count.entry(p.to_string()).or_default() += 1;
            fh_lines += 1;
        } else if l["ph"] == 1 && l["type"] == 3 {
            let (path, name) = expect(events);
            assert_eq!(l["name"], name, "event {events}");
            let h = l["args"]["fhash"].as_str().expect("fhash");
            let named = fh
                .get(h)
                .unwrap_or_else(|| panic!("event {events}: no FH for {h}"));
            assert_eq!(named, &path, "event {events} ({name})");
            events += 1;
        } else if l["name"] == "end" {
            ended = true;
        }
    }
    assert!(ended);
    assert_eq!(events, 3 * n + 6);
    // Each path's FH once, plus once more for the two that came back after eviction.
    assert_eq!(fh_count[&file(0)], 2, "the first file again: its FH again");
    assert_eq!(
        fh_count[&keep], 2,
        "the long-open fd's FH again before its read"
    );
    assert!(fh_lines >= n + 2);
    eprintln!("trace read back in {:?}", t1.elapsed());
}

// ---------------------------------------------------------------- the cached cwd

/// Relative paths resolve against a cached cwd (no `getcwd` per call): every way this
/// library sees the cwd change must move it. `chdir`, `fchdir`, and libc's walkers that
/// change directory inside libc (`nftw` with `FTW_CHDIR`, `fts` without `FTS_NOCHDIR`),
/// with a relative open in each place; each event must name the file actually opened.
const CWD_MOVES: &str = r#"
#include <ftw.h>
#include <fts.h>
static int opened;
static int visit(const char *p, const struct stat *st, int type, struct FTW *f) {
    (void)p; (void)st; (void)f;
    if (type == FTW_F) {
        /* FTW_CHDIR: the cwd is the file's directory; open it by its base name */
        int fd = open(p + f->base, O_RDONLY);  CHECK(fd >= 0);
        char b[4]; CHECK(read(fd, b, 4) == 4); CHECK(close(fd) == 0);
        opened++;
    }
    return 0;
}
static void rd(const char *rel) {
    int fd = open(rel, O_RDONLY); CHECK(fd >= 0);
    char b[4]; CHECK(read(fd, b, 4) == 4); CHECK(close(fd) == 0);
}
int main(int argc, char **argv) {
    const char *d = argv[1];   /* contains a/x.bin and b/y.bin */
    char p[600];
    snprintf(p, sizeof p, "%s/a", d);
    CHECK(chdir(p) == 0);
    rd("x.bin");  rd("x.bin");              /* the second comes from the cache */
    snprintf(p, sizeof p, "%s/b", d);
    int bfd = open(p, O_RDONLY | O_DIRECTORY); CHECK(bfd >= 0);
    CHECK(fchdir(bfd) == 0);
    rd("y.bin");
    CHECK(close(bfd) == 0);
    CHECK(chdir("../a") == 0);
    rd("x.bin");
    CHECK(nftw(d, visit, 8, FTW_CHDIR | FTW_PHYS) == 0);
    CHECK(opened == 2);
    rd("x.bin");                            /* nftw came back to a */
    char *av[] = {(char *)d, NULL};
    FTS *fts = fts_open(av, FTS_PHYSICAL, NULL); CHECK(fts);
    FTSENT *e;
    while ((e = fts_read(fts))) {
        if (e->fts_info == FTS_F) {
            /* without FTS_NOCHDIR fts_accpath is relative to the directory fts moved to */
            int fd = open(e->fts_accpath, O_RDONLY); CHECK(fd >= 0);
            char b[4]; CHECK(read(fd, b, 4) == 4); CHECK(close(fd) == 0);
        }
    }
    CHECK(fts_close(fts) == 0);
    rd("x.bin");
    puts("done");
    return 0;
}
"#;

#[test]
fn relative_opens_follow_every_cwd_change() {
    let s = Scratch::new("cwdmoves");
    let exe = s.compile("cwd", &prog(CWD_MOVES));
    std::fs::create_dir_all(s.path("data/a")).unwrap();
    std::fs::create_dir_all(s.path("data/b")).unwrap();
    std::fs::write(s.path("data/a/x.bin"), b"xxxx").unwrap();
    std::fs::write(s.path("data/b/y.bin"), b"yyyy").unwrap();
    ok(s.cmd(&exe, Some(&s.s("data")))
        .arg(s.s("data"))
        .output()
        .unwrap());
    let t = s.only_trace();
    let (x, y) = (s.s("data/a/x.bin"), s.s("data/b/y.bin"));
    // Each open of a file, in order: the cache must never give a stale directory.
    let opens: Vec<String> = t
        .io()
        .into_iter()
        .filter(|e| e["name"] == "open")
        .map(|e| t.file_of(e))
        .filter(|f| *f != s.s("data/b"))
        .collect();
    // nftw and fts order the two directories' entries their own way: compare those as sets.
    assert_eq!(opens.len(), 10, "{opens:?}");
    assert_eq!(opens[..4], [x.clone(), x.clone(), y.clone(), x.clone()]);
    let mut walk1 = opens[4..6].to_vec();
    walk1.sort();
    assert_eq!(walk1, [x.clone(), y.clone()]);
    assert_eq!(opens[6], x);
    let mut walk2 = opens[7..9].to_vec();
    walk2.sort();
    assert_eq!(walk2, [x.clone(), y.clone()]);
    assert_eq!(opens[9], x);
}

/// One relative name in several directories, opened again and again: a thread's kept
/// resolution of its last path (`hooks/resolved.rs`) must follow every cwd change, and never
/// answer for a path relative to a directory fd.
const SAME_NAME: &str = r#"
static void rd(int dirfd, const char *rel) {
    int fd = openat(dirfd, rel, O_RDONLY); CHECK(fd >= 0);
    char b[4]; CHECK(read(fd, b, 4) == 4); CHECK(close(fd) == 0);
}
int main(int argc, char **argv) {
    const char *d = argv[1];   /* contains a/f.bin and b/f.bin */
    char p[600], q[600];
    snprintf(p, sizeof p, "%s/a", d);
    CHECK(chdir(p) == 0);
    for (int i = 0; i < 3; i++) rd(AT_FDCWD, "f.bin");
    CHECK(chdir("../b") == 0);
    for (int i = 0; i < 3; i++) rd(AT_FDCWD, "f.bin");
    int afd = open(p, O_RDONLY | O_DIRECTORY); CHECK(afd >= 0);
    for (int i = 0; i < 2; i++) rd(afd, "f.bin");
    rd(AT_FDCWD, "f.bin");
    CHECK(fchdir(afd) == 0);
    for (int i = 0; i < 3; i++) rd(AT_FDCWD, "f.bin");
    CHECK(close(afd) == 0);
    snprintf(p, sizeof p, "%s/b", d);
    snprintf(q, sizeof q, "%s/c", d);
    CHECK(rename(p, q) == 0);
    CHECK(chdir("../c") == 0);
    for (int i = 0; i < 3; i++) rd(AT_FDCWD, "f.bin");
    snprintf(p, sizeof p, "%s/a/f.bin", d);
    snprintf(q, sizeof q, "%s/c/f.bin", d);
    for (int i = 0; i < 3; i++) rd(AT_FDCWD, p);
    rd(AT_FDCWD, q);                    /* once: the kept entry stays a's, with a's slot */
    rd(AT_FDCWD, p);
    for (int i = 0; i < 2; i++) rd(AT_FDCWD, "../a/f.bin");
    puts("done");
    return 0;
}
"#;

#[test]
fn a_kept_relative_path_follows_the_cwd_and_never_a_dirfd() {
    let s = Scratch::new("samename");
    let exe = s.compile("samename", &prog(SAME_NAME));
    for dir in ["a", "b"] {
        std::fs::create_dir_all(s.path(&format!("data/{dir}"))).unwrap();
        std::fs::write(s.path(&format!("data/{dir}/f.bin")), b"ffff").unwrap();
    }
    ok(s.cmd(&exe, Some(&s.s("data")))
        .arg(s.s("data"))
        .output()
        .unwrap());
    let t = s.only_trace();
    let (a, b, c) = (
        s.s("data/a/f.bin"),
        s.s("data/b/f.bin"),
        s.s("data/c/f.bin"),
    );
    let opens: Vec<String> = t
        .io()
        .into_iter()
        .filter(|e| e["name"] == "openat" || e["name"] == "open")
        .map(|e| t.file_of(e))
        .filter(|f| *f != s.s("data/a"))
        .collect();
    let want: Vec<&String> = [
        (&a, 3),
        (&b, 3),
        (&a, 2),
        (&b, 1),
        (&a, 3),
        (&c, 3),
        (&a, 3),
        (&c, 1),
        (&a, 3),
    ]
    .into_iter()
    .flat_map(|(f, k)| std::iter::repeat_n(f, k))
    .collect();
    let got: Vec<&String> = opens.iter().collect();
    assert_eq!(got, want);
    // Every read names the file its open did.
    let reads: Vec<String> = t
        .io()
        .into_iter()
        .filter(|e| e["name"] == "read")
        .map(|e| t.file_of(e))
        .collect();
    assert_eq!(reads.iter().collect::<Vec<_>>(), want);
}

// ---------------------------------------------------------------- signals passed on to itself

/// A program whose SIGTERM handler passes the signal on with the default action
/// (`signal(SIGTERM, SIG_DFL); kill(getpid(), SIGTERM)` or `raise`), as PyTorch's DataLoader
/// workers do for a SIGTERM that is not from their parent: the trace must be finished
/// before the process dies, with a flush interval that would otherwise write nothing.
const PASS_ON: &str = r#"
static int use_raise;
static void on_term(int sig) {
    signal(sig, SIG_DFL);
    if (use_raise) raise(sig); else kill(getpid(), sig);
}
int main(int argc, char **argv) {
    char p[600], buf[64];
    use_raise = !strcmp(argv[2], "raise");
    snprintf(p, sizeof p, "%s/f.bin", argv[1]);
    int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);  CHECK(fd >= 0);
    CHECK(write(fd, "0123456789", 10) == 10);
    for (int i = 0; i < 100; i++) CHECK(pread(fd, buf, 10, 0) == 10);
    signal(SIGTERM, on_term);
    puts("ready");
    fflush(stdout);
    for (;;) pause();
}
"#;

#[test]
fn a_handler_that_passes_sigterm_on_still_leaves_a_complete_trace() {
    for how in ["kill", "raise"] {
        let s = Scratch::new(&format!("passon-{how}"));
        let exe = s.compile("passon", &prog(PASS_ON));
        std::fs::create_dir_all(s.path("data")).unwrap();
        let mut child = spawn_ready(
            s.cmd(&exe, Some(&s.s("data")))
                .args([&s.s("data"), how])
                .env("DFTRACER_FLUSH_INTERVAL_MS", "600000"),
        );
        // SAFETY: kill(2) on the child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let st = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            st.signal(),
            Some(libc::SIGTERM),
            "{how}: dies by the signal"
        );
        let t = s.only_trace();
        let names = t.names();
        assert_eq!(
            names.iter().filter(|n| *n == "pread").count(),
            100,
            "{how}: {names:?}"
        );
        assert!(
            t.has_end(),
            "{how}: the trace was finished before the process died"
        );
    }
}

/// The calls that say nothing about a file's I/O: `isatty`, and the fstat family on the fd.
const LOW_INFO: &str = r#"
static const char *path;
static void *other(void *arg) {
    (void)arg;
    int fd = open(path, O_RDONLY);                                     CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && fstat(fd, &st) == 0);
    CHECK(close(fd) == 0);
    return NULL;
}
int main(int argc, char **argv) {
    (void)argc;
    char f[512];
    snprintf(f, sizeof f, "%s/f.bin", argv[1]);
    path = f;
    int fd = open(f, O_CREAT | O_RDWR | O_TRUNC, 0644);               CHECK(fd >= 0);
    struct stat st;
    struct statx sx;
    for (int i = 0; i < 3; i++) CHECK(fstat(fd, &st) == 0);
    for (int i = 0; i < 2; i++) CHECK(isatty(fd) == 0 && errno == ENOTTY);
    CHECK(fstatat(fd, "", &st, AT_EMPTY_PATH) == 0);
    CHECK(statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) == 0);
    /* A failing call is an event, and errno is the call's. */
    errno = 0;
    CHECK(statx(fd, "", AT_EMPTY_PATH, 0x80000000U, &sx) == -1 && errno == EINVAL);
    /* Untraced fd: nothing. */
    CHECK(fstat(0, &st) == 0 || errno == EBADF);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECK(write(fd, "x", 1) == 1);
    CHECK(close(fd) == 0);
    printf("done\n");
    return 0;
}
"#;

/// `DFTRACER_FOLD_CALLS` (on by default): `isatty` and the fstat family on a traced fd that
/// returned 0 are counted in one ph 3 record per name, thread and interval bucket (`dft_cnt`
/// exact, durations summed), not written one by one; a failing one is an event; the rest of
/// the trace is unchanged; `end.args.folded` counts them. With `0`, each is an event again.
#[test]
fn low_information_calls_are_counted() {
    let s = Scratch::new("lowinfo");
    let exe = s.compile("lowinfo", &prog(LOW_INFO));
    let run = |fold: Option<&str>| {
        let _ = std::fs::remove_dir_all(s.path("o"));
        let mut c = s.cmd(&exe, Some(&s.s("data")));
        if let Some(v) = fold {
            c.env("DFTRACER_FOLD_CALLS", v);
        }
        let out = ok(c.arg(s.path("data")).output().unwrap());
        assert_eq!(out, "done\n", "the program's stdout is untouched");
        s.only_trace()
    };
    let folded_names = ["fstat", "isatty", "fstatat", "statx"];
    let t = run(None);
    let main_tid = t.io()[0]["tid"].as_i64().unwrap();
    // Events: the folded calls are gone, the failing statx stays, in order on each thread.
    let on = |main: bool| -> Vec<&str> {
        t.io()
            .into_iter()
            .filter(|e| (e["tid"] == main_tid) == main)
            .map(|e| e["name"].as_str().unwrap())
            .collect()
    };
    assert_eq!(on(true), ["open", "statx", "write", "close"], "main thread");
    assert_eq!(on(false), ["open", "close"], "the other thread");
    let failed = t.io()[1];
    assert_eq!(
        (failed["name"].as_str(), failed["args"]["ret"].as_i64()),
        (Some("statx"), Some(-1))
    );
    // ph 3 records: exact counts per name and thread, durations as aggregated records.
    let mut counts = std::collections::BTreeMap::new();
    for l in t.lines.iter().filter(|l| l["ph"] == 3) {
        let (name, tid) = (
            l["name"].as_str().unwrap().to_string(),
            l["tid"].as_i64().unwrap(),
        );
        assert!(folded_names.contains(&name.as_str()), "{l}");
        assert_eq!(
            (l["cat"].as_str(), l["type"].as_i64()),
            (Some("POSIX"), Some(3)),
            "{l}"
        );
        assert!(
            l["args"].get("fhash").is_none() && l["args"].get("fd").is_none(),
            "{l}"
        );
        let a = &l["args"];
        let n = a["dft_cnt"].as_u64().unwrap();
        if n == 1 {
            assert!(a["dur"].as_u64().is_some(), "{l}");
        } else {
            let (mn, mx, sum) = (
                a["dur_min"].as_u64().unwrap(),
                a["dur_max"].as_u64().unwrap(),
                a["dur_sum"].as_u64().unwrap(),
            );
            assert!(mn <= mx && mx <= sum && sum <= mx * n, "{l}");
        }
        *counts.entry((name, tid == main_tid)).or_insert(0) += n;
    }
    let want: std::collections::BTreeMap<(String, bool), u64> = [
        (("fstat".to_string(), true), 3),
        (("fstat".to_string(), false), 2),
        (("isatty".to_string(), true), 2),
        (("fstatat".to_string(), true), 1),
        (("statx".to_string(), true), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, want, "folded calls per name and thread");
    let end = t.lines.last().unwrap();
    assert_eq!(end["name"], "end");
    assert_eq!(end["args"]["folded"], 9);
    assert_eq!(end["args"]["cfg"]["fold_calls"], 1);
    // The same program with folding off: every call is its event, and no ph 3 record.
    let t = run(Some("0"));
    let names = t.names();
    for (name, n) in [("fstat", 5), ("isatty", 2), ("fstatat", 1), ("statx", 2)] {
        assert_eq!(
            names.iter().filter(|x| *x == name).count(),
            n,
            "{name}: {names:?}"
        );
    }
    assert!(t.lines.iter().all(|l| l["ph"] != 3));
    let end = t.lines.last().unwrap();
    assert!(end["args"].get("folded").is_none(), "{end}");
    assert_eq!(end["args"]["cfg"]["fold_calls"], 0);
}
