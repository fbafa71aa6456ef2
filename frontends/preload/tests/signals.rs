//! Signals: the host's signal handling is what it is untraced (what `sigaction`/`signal`
//! report, programs that block signals and take them with `sigwait`/`signalfd`/
//! `sigtimedwait`, a cgo Go program's SIGTERM), and every death that runs user code keeps the
//! trace (abort, assert, SIGPIPE, SIGQUIT, a re-raised SIGALRM, SIGSEGV within a bounded time).
//! Each case runs the same program untraced as the reference.

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// 100 traced preads on `<argv[1]>/f.bin`, then what `argv[2]` says.
const DEATHS: &str = r#"
#include <assert.h>
static void reads(const char *dir, int n) {
    char p[600], buf[16];
    snprintf(p, sizeof p, "%s/f.bin", dir);
    int fd = open(p, O_CREAT | O_RDWR, 0644);  CHECK(fd >= 0);
    CHECK(pwrite(fd, "0123456789", 10, 0) == 10);
    for (int i = 0; i < n; i++) CHECK(pread(fd, buf, 10, 0) == 10);
    close(fd);
}
int main(int argc, char **argv) {
    const char *how = argv[2];
    reads(argv[1], 100);
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "assert")) assert(argc == 99);
    if (!strcmp(how, "quit")) raise(SIGQUIT);
    if (!strcmp(how, "kill-quit")) kill(getpid(), SIGQUIT);
    if (!strcmp(how, "segv")) *(volatile int *)(long)argc = 1;
    if (!strcmp(how, "pipe")) for (;;) puts("a line for head -1");
    if (!strcmp(how, "usr1")) raise(SIGUSR1);
    return 0;
}
"#;

fn preads(t: &Trace) -> usize {
    t.names().iter().filter(|n| *n == "pread").count()
}

fn end_args(t: &Trace) -> J {
    t.lines
        .iter()
        .find(|l| l["name"] == "end" && l["cat"] == "dftracer")
        .map(|l| l["args"].clone())
        .unwrap_or(J::Null)
}

/// The status the same command has without the preload.
fn untraced(exe: &std::path::Path, args: &[&str]) -> ExitStatus {
    Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
}

/// SIGQUIT and SIGINT back to their default action in this test process, so the programs it
/// starts inherit it: a shell starts background jobs with both ignored (`cmd &` without job
/// control), and an ignored SIGQUIT would make the untraced run exit 0.
fn default_quit_and_int() {
    // SAFETY: installs SIG_DFL (no handler code) for two signals of this process.
    unsafe {
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

#[test]
fn abort_assert_sigquit_and_sigusr1_keep_the_whole_trace_and_the_status() {
    default_quit_and_int();
    let s = Scratch::new("deaths");
    let exe = s.compile("deaths", &prog(DEATHS));
    for how in ["abort", "assert", "quit", "kill-quit", "usr1"] {
        for f in s.traces() {
            std::fs::remove_file(f).unwrap();
        }
        let data = s.s("data");
        let reference = untraced(&exe, &[&data, how]);
        assert!(reference.signal().is_some(), "{how}: {reference:?}");
        let out = s
            .cmd(&exe, Some(&data))
            .args([&data, how])
            // Nothing is written before the end: only the signal path can keep the events.
            .env("DFTRACER_FLUSH_INTERVAL_MS", "600000")
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            reference.signal(),
            "{how}: dies by the same signal as untraced"
        );
        let t = s.only_trace();
        assert_eq!(preads(&t), 100, "{how}");
        assert!(t.has_end(), "{how}: the trace has its end");
        let end = end_args(&t);
        assert_eq!(end["signal"], reference.signal().unwrap(), "{how}: {end}");
        assert_eq!(end["lost"], 0, "{how}");
        assert_eq!(end["dropped"], 0, "{how}");
    }
}

#[test]
fn sigpipe_in_a_pipe_to_head_keeps_the_whole_trace() {
    let s = Scratch::new("pipe");
    let exe = s.compile("deaths", &prog(DEATHS));
    let data = s.s("data");
    // `prog | head -1`, through a real shell pipeline; PIPESTATUS gives the program's status.
    let script = format!(
        "'{}' '{}' pipe | head -1; echo \"rc=${{PIPESTATUS[0]}}\"",
        exe.display(),
        data
    );
    let reference = Command::new("bash").args(["-c", &script]).output().unwrap();
    let reference = String::from_utf8(reference.stdout).unwrap();
    assert!(reference.ends_with("rc=141\n"), "{reference}");
    let out = ok(s
        .cmd("bash", Some(&data))
        .args(["-c", &script])
        .env("DFTRACER_FLUSH_INTERVAL_MS", "600000")
        .output()
        .unwrap());
    assert_eq!(out, reference, "same output and status as untraced");
    // bash's file holds only its process calls (it forks both sides and waits: FORMAT.md
    // "Process calls"); head writes none (it neither forks nor touches the data dir).
    let files = s.traces();
    assert_eq!(files.len(), 2, "{files:?}");
    let traces: Vec<Trace> = files.iter().map(|p| Trace::read(p)).collect();
    let shell = traces
        .iter()
        .find(|t| preads(t) == 0)
        .expect("the shell's file");
    for e in shell.io() {
        assert!(
            ["fork", "vfork", "wait", "waitpid", "wait4"].contains(&e["name"].as_str().unwrap()),
            "the shell records only process calls: {e}"
        );
        assert_eq!(e["dur"], 0, "{e}");
    }
    let t = traces.iter().find(|t| preads(t) > 0).unwrap();
    assert_eq!(preads(t), 100);
    assert!(t.has_end());
    assert_eq!(end_args(t)["signal"], libc::SIGPIPE);
}

#[test]
fn sigsegv_dies_as_untraced_and_keeps_what_it_can_in_bounded_time() {
    // Built before any timing starts.
    lib();
    let s = Scratch::new("segv");
    let exe = s.compile("deaths", &prog(DEATHS));
    let data = s.s("data");
    let reference = untraced(&exe, &[&data, "segv"]);
    assert_eq!(reference.signal(), Some(libc::SIGSEGV));
    let t0 = Instant::now();
    let out = s
        .cmd(&exe, Some(&data))
        .args([&data, "segv"])
        .env("DFTRACER_FLUSH_INTERVAL_MS", "600000")
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV));
    assert_eq!(out.status.core_dumped(), reference.core_dumped());
    assert!(took < Duration::from_secs(2), "{took:?}");
    // A fault outside the tracer: the writer is free, the trace is whole.
    let t = s.only_trace();
    assert_eq!(preads(&t), 100);
    assert!(t.has_end());
}

/// Prints every managed signal's disposition as a query reports it (the restorer only as
/// set or not: its address moves with ASLR; the mask's first word only, the kernel's 64
/// signals: glibc copies the rest of its 1024-bit `sigset_t` from its own uninitialised
/// stack, so untraced runs print whatever was there), through a sequence of changes made with
/// every API, then exits 0.
const DISPOSITIONS: &str = r#"
static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGPIPE, SIGALRM,
    SIGUSR1, SIGUSR2, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGSEGV, SIGBUS, SIGFPE, SIGILL,
    SIGTRAP, SIGSYS, SIGCHLD, SIGWINCH};
static void h(int s) { (void)s; }
static void show(const char *what) {
    for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa;
        memset(&sa, 0x5a, sizeof sa);
        CHECK(sigaction(sigs[i], NULL, &sa) == 0);
        const char *hn = sa.sa_handler == SIG_DFL ? "DFL" : sa.sa_handler == SIG_IGN ? "IGN"
            : sa.sa_handler == h ? "h" : "OTHER";
        printf("%s %d %s flags=%x mask=%lx restorer=%d\n", what, sigs[i], hn,
            sa.sa_flags, ((unsigned long *)&sa.sa_mask)[0], sa.sa_restorer != NULL);
    }
}
int main(void) {
    char p[64];
    int fd = open("data/f", O_CREAT | O_RDWR, 0644);  CHECK(fd >= 0);
    CHECK(write(fd, "x", 1) == 1);
    show("start");
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    sigaddset(&sa.sa_mask, SIGKILL);
    sa.sa_flags = SA_RESTART | SA_NODEFER | 0x400;
    memset(&old, 0x5a, sizeof old);
    CHECK(sigaction(SIGTERM, &sa, &old) == 0);
    printf("old %d flags=%x mask=%lx\n", old.sa_handler == SIG_DFL, old.sa_flags,
        ((unsigned long *)&old.sa_mask)[0]);
    void (*o)(int);
    o = signal(SIGINT, h);        printf("signal INT h -> %d\n", o == SIG_DFL);
    o = signal(SIGINT, SIG_DFL);  printf("signal INT DFL -> %d\n", o == h);
    o = signal(SIGHUP, SIG_IGN);  printf("signal HUP IGN -> %d\n", o == SIG_DFL);
    o = sysv_signal(SIGUSR1, h);  printf("sysv USR1 h -> %d\n", o == SIG_DFL);
    o = sigset(SIGUSR2, SIG_HOLD); printf("sigset USR2 HOLD -> %d\n", o == SIG_DFL);
    o = sigset(SIGUSR2, SIG_DFL); printf("sigset USR2 DFL -> %d\n", o == SIG_HOLD);
    CHECK(siginterrupt(SIGALRM, 1) == 0);
    o = signal(SIGALRM, SIG_DFL); printf("signal ALRM DFL -> %d\n", o == SIG_DFL);
    o = signal(SIGCHLD, h);       printf("signal CHLD h -> %d\n", o == SIG_DFL);
    o = signal(SIGKILL, h);       printf("signal KILL -> %d errno %d\n", o == SIG_ERR, errno);
    o = signal(SIGTERM, SIG_ERR); printf("signal ERR -> %d errno %d\n", o == SIG_ERR, errno);
    errno = 0;
    CHECK(sigaction(SIGKILL, &sa, NULL) == -1);
    printf("sigaction KILL errno %d\n", errno);
    snprintf(p, sizeof p, "end");
    show(p);
    close(fd);
    return 0;
}
"#;

#[test]
fn dispositions_read_exactly_as_untraced() {
    // Before either run (the other test may reset them at any time).
    default_quit_and_int();
    let s = Scratch::new("disp");
    let exe = s.compile("disp", &prog(DISPOSITIONS));
    let reference = Command::new(&exe).current_dir(&s.dir).output().unwrap();
    let reference = ok(reference);
    let traced = ok(s.cmd(&exe, Some(&s.s("data"))).output().unwrap());
    assert_eq!(traced, reference);
    // And the handler is really in place where the host left SIG_DFL: the trace has an end.
    assert!(s.only_trace().has_end());
}

/// Blocks SIGUSR1 and SIGTERM and takes them itself: `raise` while blocked + `sigwait`,
/// `kill(getpid())` + `signalfd`, `raise` + `sigtimedwait`, with traced preads between and
/// after; exits 0.
const TAKES_ITS_OWN: &str = r#"
#include <sys/signalfd.h>
static int fd;
static void reads(int n) {
    char b[16];
    for (int i = 0; i < n; i++) CHECK(pread(fd, b, 10, 0) == 10);
}
int main(int argc, char **argv) {
    char p[600];
    snprintf(p, sizeof p, "%s/f.bin", argv[1]);
    fd = open(p, O_CREAT | O_RDWR, 0644);  CHECK(fd >= 0);
    CHECK(pwrite(fd, "0123456789", 10, 0) == 10);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    CHECK(pthread_sigmask(SIG_BLOCK, &set, NULL) == 0);
    reads(50);
    int got = 0;
    CHECK(raise(SIGUSR1) == 0);
    CHECK(sigwait(&set, &got) == 0 && got == SIGUSR1);
    reads(50);
    int sfd = signalfd(-1, &set, 0);  CHECK(sfd >= 0);
    CHECK(kill(getpid(), SIGTERM) == 0);
    struct signalfd_siginfo si;
    CHECK(read(sfd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGTERM);
    reads(50);
    CHECK(raise(SIGUSR1) == 0);
    struct timespec ts = {1, 0};
    CHECK(sigtimedwait(&set, NULL, &ts) == SIGUSR1);
    reads(50);
    puts("done");
    return 0;
}
"#;

#[test]
fn signals_the_program_blocks_and_takes_itself_end_nothing() {
    let s = Scratch::new("takes");
    let exe = s.compile("takes", &prog(TAKES_ITS_OWN));
    let data = s.s("data");
    assert_eq!(
        ok(Command::new(&exe).arg(&data).output().unwrap()),
        "done\n"
    );
    let out = s.cmd(&exe, Some(&data)).arg(&data).output().unwrap();
    assert_eq!(ok(out.clone()), "done\n");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = s.only_trace();
    assert_eq!(preads(&t), 200, "every event to the end");
    assert!(t.has_end());
    let end = end_args(&t);
    assert!(end.get("signal").is_none(), "{end}");
    assert_eq!(end["dropped"], 0);
    assert_eq!(end["lost"], 0);
}

/// A SIGALRM handler of the program's own that passes the signal on with the default action,
/// firing during a tight loop of traced preads with small rings (so the alarm often lands in
/// a ring hand-over, where the tracer holds its locks). Prints how many preads returned.
const ALARM: &str = r#"
#include <sys/time.h>
static volatile long done;
static void on_alarm(int sig) {
    char b[32];
    int n = snprintf(b, sizeof b, "%ld\n", done);
    write(1, b, n);
    signal(sig, SIG_DFL);
    raise(sig);
}
int main(int argc, char **argv) {
    char p[600], b[16];
    snprintf(p, sizeof p, "%s/f.bin", argv[1]);
    int fd = open(p, O_CREAT | O_RDWR, 0644);  CHECK(fd >= 0);
    CHECK(pwrite(fd, "0123456789", 10, 0) == 10);
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 0}, {0, atoi(argv[2]) * 1000}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    for (;;) { CHECK(pread(fd, b, 10, 0) == 10); done++; }
}
"#;

#[test]
fn a_reraised_sigalrm_in_a_tight_io_loop_never_stalls_and_keeps_the_trace() {
    // Built before any timing starts.
    lib();
    let s = Scratch::new("alarm");
    let exe = s.compile("alarm", &prog(ALARM));
    let data = s.s("data");
    let reference = untraced(&exe, &[&data, "100"]);
    assert_eq!(reference.signal(), Some(libc::SIGALRM));
    for run in 0..40 {
        for f in s.traces() {
            std::fs::remove_file(f).unwrap();
        }
        let ms = 60 + (run % 7) * 13;
        let t0 = Instant::now();
        let out = s
            .cmd(&exe, Some(&data))
            .args([&data, &ms.to_string()])
            .env("DFTRACER_RING_SIZE", "524288")
            .env("DFTRACER_FLUSH_INTERVAL_MS", "600000")
            .output()
            .unwrap();
        let after_alarm = t0
            .elapsed()
            .saturating_sub(Duration::from_millis(ms as u64));
        assert_eq!(out.status.signal(), Some(libc::SIGALRM), "run {run}");
        assert!(
            after_alarm < Duration::from_secs(1),
            "run {run}: {after_alarm:?} from the alarm to the death"
        );
        let done: usize = String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let t = s.only_trace();
        let n = preads(&t);
        // The pread the alarm interrupted may or may not have been recorded yet.
        assert!(
            n == done || n == done + 1,
            "run {run}: {n} preads in the trace, {done} returned"
        );
        assert!(t.has_end(), "run {run}");
        assert_eq!(end_args(&t)["dropped"], 0, "run {run}");
    }
}

// ---------------------------------------------------------------- a cgo Go program

/// `go`, installed with apt-get (Debian's `golang-go`) when missing and running as root;
/// `None` (the test says why and passes) when it cannot be had.
fn go() -> Option<String> {
    let have = || {
        Command::new("go")
            .arg("version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if have() {
        return Some("go".into());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP: no `go`, and not root to apt-get install golang-go");
        return None;
    }
    eprintln!("installing golang-go with apt-get (the cgo test needs it)");
    let ok = Command::new("sh")
        .args([
            "-c",
            "apt-get install -y -qq golang-go >/dev/null 2>&1 || \
             (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null)",
        ])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok && have() {
        Some("go".into())
    } else {
        eprintln!("SKIP: golang-go could not be installed with apt-get");
        None
    }
}

/// cgo: C does the traced I/O (Go's own I/O makes raw system calls, which no hook sees), Go
/// waits; the Go runtime installs its handlers for every signal and, for a SIGTERM nobody
/// asked for, passes it to the disposition it found.
const GO_PROG: &str = r#"
package main

/*
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
static int reads(const char *path, int n) {
    char b[16];
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0 || pwrite(fd, "0123456789", 10, 0) != 10) return -1;
    for (int i = 0; i < n; i++) if (pread(fd, b, 10, 0) != 10) return -1;
    return close(fd);
}
*/
import "C"

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if C.reads(C.CString(os.Args[1]+"/f.bin"), 100) != 0 {
		os.Exit(3)
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}
"#;

fn term_after_ready(cmd: &mut Command) -> (ExitStatus, Duration) {
    let mut child = spawn_ready(cmd);
    let t0 = Instant::now();
    // SAFETY: kill(2) on our child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return (st, t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(5) {
            child.kill().unwrap();
            panic!("still running 5 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_cgo_go_program_stops_on_sigterm_as_untraced_with_its_trace() {
    // Built before any timing starts.
    lib();
    let Some(go) = go() else { return };
    let s = Scratch::new("go");
    let dir = s.path("gosrc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.go"), GO_PROG).unwrap();
    std::fs::write(dir.join("go.mod"), "module sigterm\n\ngo 1.19\n").unwrap();
    let exe = s.path("goprog");
    let out = Command::new(&go)
        .args(["build", "-o"])
        .arg(&exe)
        .arg(".")
        .current_dir(&dir)
        .env("CGO_ENABLED", "1")
        .env("GOCACHE", s.path("gocache"))
        .env("GOPATH", s.path("gopath"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = s.s("data");
    let (reference, _) = term_after_ready(Command::new(&exe).arg(&data));
    assert_eq!(reference.signal(), Some(libc::SIGTERM), "{reference:?}");
    let (st, took) = term_after_ready(
        s.cmd(&exe, Some(&data))
            .arg(&data)
            .env("DFTRACER_FLUSH_INTERVAL_MS", "600000"),
    );
    assert_eq!(st.signal(), reference.signal(), "{st:?}");
    assert_eq!(st.code(), reference.code());
    assert!(
        took < Duration::from_secs(1),
        "{took:?} from SIGTERM to the death"
    );
    let t = s.only_trace();
    assert_eq!(preads(&t), 100);
    assert!(t.has_end());
    assert_eq!(end_args(&t)["signal"], libc::SIGTERM);
}
