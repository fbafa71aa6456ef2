//! Pure parsers for the `/proc` files the service reads. Every function takes the raw bytes of
//! a file and never panics, allocates or fails hard: a malformed line is skipped, a missing or
//! garbled number reads as 0, an over-long number saturates. They are `pub` so that the fuzz
//! crate (and the unit tests below) can feed them arbitrary bytes.

/// Splits on ASCII whitespace (space, tab, and anything else `u8::is_ascii_whitespace` says).
fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n')
}

/// A decimal unsigned integer; `None` for anything that is not all digits. Saturates at
/// `u64::MAX` instead of overflowing.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
    }
    Some(v)
}

fn parse_f64(s: &[u8]) -> Option<f64> {
    std::str::from_utf8(s)
        .ok()?
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// Trims ASCII whitespace on both sides.
pub fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Fills `out` with the numbers that follow in `it`; missing or garbled ones are 0.
fn numbers<'a>(it: impl Iterator<Item = &'a [u8]>, out: &mut [u64]) {
    let mut it = it;
    for slot in out.iter_mut() {
        *slot = it.next().and_then(parse_u64).unwrap_or(0);
    }
}

/// Jiffy counters of one `cpu` line of `/proc/stat`, in the kernel's order: user, nice,
/// system, idle, iowait, irq, softirq, steal, guest, guest_nice. Note that the kernel counts
/// guest time inside user and guest_nice inside nice.
pub type CpuTimes = [u64; 10];

/// One `cpu`/`cpuN` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuLine {
    /// `None` for the aggregate `cpu` line, `Some(n)` for `cpuN`.
    pub cpu: Option<u32>,
    pub times: CpuTimes,
}

/// The `cpu` lines of `/proc/stat`, in file order.
pub fn stat_cpus(text: &[u8]) -> impl Iterator<Item = CpuLine> + '_ {
    lines(text).filter_map(|line| {
        let mut f = fields(line);
        let head = f.next()?;
        let rest = head.strip_prefix(b"cpu")?;
        let cpu = if rest.is_empty() {
            None
        } else {
            Some(u32::try_from(parse_u64(rest)?).ok()?)
        };
        let mut times = [0u64; 10];
        numbers(f, &mut times);
        Some(CpuLine { cpu, times })
    })
}

/// The scheduler counters of `/proc/stat` (missing lines read as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatCounters {
    /// Interrupts serviced since boot (first number of `intr`).
    pub intr: u64,
    /// Context switches since boot.
    pub ctxt: u64,
    /// Processes and threads created since boot.
    pub processes: u64,
    /// Runnable right now.
    pub procs_running: u64,
    /// Blocked on I/O right now.
    pub procs_blocked: u64,
}

pub fn stat_counters(text: &[u8]) -> StatCounters {
    let mut c = StatCounters::default();
    for line in lines(text) {
        let mut f = fields(line);
        let (Some(key), Some(v)) = (f.next(), f.next()) else {
            continue;
        };
        let v = parse_u64(v).unwrap_or(0);
        match key {
            b"intr" => c.intr = v,
            b"ctxt" => c.ctxt = v,
            b"processes" => c.processes = v,
            b"procs_running" => c.procs_running = v,
            b"procs_blocked" => c.procs_blocked = v,
            _ => {}
        }
    }
    c
}

/// Fields of a `/proc/diskstats` line after the name (Documentation/admin-guide/iostats.rst):
/// 0 reads completed, 1 reads merged, 2 sectors read, 3 ms reading, 4 writes completed,
/// 5 writes merged, 6 sectors written, 7 ms writing, 8 I/Os in progress, 9 ms doing I/O,
/// 10 weighted ms, 11..14 discards (4.18+), 15..16 flushes (5.5+). Older kernels give fewer
/// (missing ones read as 0).
pub const DISK_FIELDS: usize = 17;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskLine<'a> {
    pub major: u64,
    pub minor: u64,
    pub name: &'a [u8],
    pub stats: [u64; DISK_FIELDS],
}

/// The lines of `/proc/diskstats` that have at least major, minor and name.
pub fn diskstats(text: &[u8]) -> impl Iterator<Item = DiskLine<'_>> {
    lines(text).filter_map(|line| {
        let mut f = fields(line);
        let major = parse_u64(f.next()?)?;
        let minor = parse_u64(f.next()?)?;
        let name = f.next()?;
        let mut stats = [0u64; DISK_FIELDS];
        numbers(f, &mut stats);
        Some(DiskLine {
            major,
            minor,
            name,
            stats,
        })
    })
}

/// Receive counters of `/proc/net/dev`: bytes, packets, errs, drop, fifo, frame, compressed,
/// multicast; then transmit: bytes, packets, errs, drop, fifo, colls, carrier, compressed.
pub const NET_FIELDS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetLine<'a> {
    /// Interface name with the kernel's padding removed (`"  eth0"` → `"eth0"`).
    pub name: &'a [u8],
    pub stats: [u64; NET_FIELDS],
}

/// Interface lines of `/proc/net/dev` (the two header lines have no `:` before the fields and
/// are skipped; so is a line with an empty name).
pub fn net_dev(text: &[u8]) -> impl Iterator<Item = NetLine<'_>> {
    lines(text).filter_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        let name = trim(&line[..colon]);
        if name.is_empty() || name.contains(&b'|') {
            return None;
        }
        let mut stats = [0u64; NET_FIELDS];
        numbers(fields(&line[colon + 1..]), &mut stats);
        Some(NetLine { name, stats })
    })
}

/// `Key: value [kB]` lines of `/proc/meminfo`; the value as written (kB for every key but the
/// `HugePages_*` counts).
pub fn meminfo(text: &[u8]) -> impl Iterator<Item = (&[u8], u64)> {
    lines(text).filter_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        let key = trim(&line[..colon]);
        if key.is_empty() {
            return None;
        }
        let value = parse_u64(fields(&line[colon + 1..]).next()?)?;
        Some((key, value))
    })
}

/// `/proc/loadavg`: `0.45 0.20 0.07 3/97 6963`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadAvg {
    pub load1: f64,
    pub load5: f64,
    pub load15: f64,
    /// Currently runnable scheduling entities.
    pub runnable: u64,
    /// Scheduling entities (processes and threads) that exist.
    pub total: u64,
}

pub fn loadavg(text: &[u8]) -> Option<LoadAvg> {
    let mut f = fields(text);
    let load1 = parse_f64(f.next()?)?;
    let load5 = parse_f64(f.next()?)?;
    let load15 = parse_f64(f.next()?)?;
    let procs = f.next()?;
    let slash = procs.iter().position(|&b| b == b'/')?;
    Some(LoadAvg {
        load1,
        load5,
        load15,
        runnable: parse_u64(&procs[..slash])?,
        total: parse_u64(&procs[slash + 1..])?,
    })
}

/// The NUL-separated arguments of `/proc/<pid>/cmdline` (a trailing NUL does not make an
/// empty last argument; an interior empty argument is kept).
pub fn cmdline_args(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let raw = raw.strip_suffix(b"\0").unwrap_or(raw);
    let empty = raw.is_empty();
    raw.split(|&b| b == 0).filter(move |_| !empty)
}

/// From `/proc/<pid>/stat`: the one-letter state (`R`, `S`, `Z`, ...) and utime + stime in
/// clock ticks. The command name in parentheses may itself contain `)` and spaces, so the
/// fields are counted from the last `)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidStat {
    pub state: u8,
    pub utime: u64,
    pub stime: u64,
}

pub fn pid_stat(raw: &[u8]) -> Option<PidStat> {
    let close = raw.iter().rposition(|&b| b == b')')?;
    let mut f = fields(&raw[close + 1..]);
    let state = *f.next()?.first()?;
    // After the state: ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    // utime stime (fields 4..=15 of proc(5)).
    let mut it = f.skip(10);
    let utime = parse_u64(it.next()?)?;
    let stime = parse_u64(it.next()?)?;
    Some(PidStat {
        state,
        utime,
        stime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"cpu  4632 1376 2003 144468 235 0 23 13 0 0\n\
cpu0 1924 657 854 72926 36 0 6 4 0 0\n\
cpu1 2708 718 1149 71542 198 0 17 8 0 0\n\
intr 99243 0 0 0\nctxt 128325\nbtime 1795990000\nprocesses 7000\n\
procs_running 1\nprocs_blocked 0\nsoftirq 1 2 3\n";

    const DISK: &[u8] = b"   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
 254       0 vda 12512 4504 3273338 13910 1952 8612 1590136 3342 0 3112 17383 824 0 57456 127 58 3\n\
 254       1 vda1 100 0 800 10 5 0 40 1 0 11 11\n";

    const NET: &[u8] = b"Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0\n  \
eth0: 134127734    5165    0    0    0     0          0         0   330745    3643    0    0    0     0       0          0\n";

    const MEM: &[u8] = b"MemTotal:       24683656 kB\nMemFree:        23378140 kB\n\
MemAvailable:   24194452 kB\nActive(anon):      1000 kB\nHugePages_Total:       0\n";

    #[test]
    fn stat_lines() {
        let v: Vec<CpuLine> = stat_cpus(STAT).collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].cpu, None);
        assert_eq!(v[0].times, [4632, 1376, 2003, 144468, 235, 0, 23, 13, 0, 0]);
        assert_eq!(v[2].cpu, Some(1));
        assert_eq!(v[2].times[3], 71542);
        // Old kernels: fewer columns read as 0.
        let old: Vec<CpuLine> = stat_cpus(b"cpu 1 2 3 4\n").collect();
        assert_eq!(old[0].times, [1, 2, 3, 4, 0, 0, 0, 0, 0, 0]);
        // `cpux` is not a cpu line.
        assert_eq!(stat_cpus(b"cpux 1 2\ncpu7 1\n").count(), 1);
        let c = stat_counters(STAT);
        assert_eq!((c.intr, c.ctxt, c.processes), (99243, 128325, 7000));
        assert_eq!((c.procs_running, c.procs_blocked), (1, 0));
    }

    #[test]
    fn disk_lines() {
        let v: Vec<DiskLine> = diskstats(DISK).collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1].name, b"vda");
        assert_eq!((v[1].major, v[1].minor), (254, 0));
        assert_eq!(v[1].stats[0], 12512);
        assert_eq!(v[1].stats[2], 3273338);
        assert_eq!(v[1].stats[16], 3);
        assert_eq!(v[2].stats[10], 11);
        assert_eq!(v[2].stats[11], 0);
    }

    #[test]
    fn net_lines_are_trimmed() {
        let v: Vec<NetLine> = net_dev(NET).collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].name, b"lo");
        assert_eq!(v[1].name, b"eth0");
        assert_eq!(v[1].stats[0], 134127734);
        assert_eq!(v[1].stats[9], 3643);
        // Old kernels glue the first number to the colon.
        let v: Vec<NetLine> = net_dev(b"  eth1:12 3 0 0 0 0 0 0 4 5\n").collect();
        assert_eq!(v[0].name, b"eth1");
        assert_eq!(v[0].stats[0], 12);
        assert_eq!(v[0].stats[8], 4);
    }

    #[test]
    fn meminfo_keys() {
        let v: Vec<(&[u8], u64)> = meminfo(MEM).collect();
        assert_eq!(v[0], (&b"MemTotal"[..], 24683656));
        assert_eq!(v[3], (&b"Active(anon)"[..], 1000));
        assert_eq!(v[4], (&b"HugePages_Total"[..], 0));
    }

    #[test]
    fn loadavg_line() {
        let l = loadavg(b"0.45 0.20 0.07 3/97 6963\n").unwrap();
        assert_eq!((l.load1, l.load5, l.load15), (0.45, 0.20, 0.07));
        assert_eq!((l.runnable, l.total), (3, 97));
        assert!(loadavg(b"0.45 0.20").is_none());
        assert!(loadavg(b"nan inf 1 1/2 3").is_none());
    }

    #[test]
    fn cmdline_and_pid_stat() {
        let a: Vec<&[u8]> = cmdline_args(b"/bin/dftracer_service\0run\0/tmp\0").collect();
        assert_eq!(a, vec![&b"/bin/dftracer_service"[..], b"run", b"/tmp"]);
        assert_eq!(cmdline_args(b"").count(), 0);
        assert_eq!(cmdline_args(b"\0").count(), 0);
        let s = pid_stat(b"42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0").unwrap();
        assert_eq!((s.state, s.utime, s.stime), (b'S', 7, 3));
        assert!(pid_stat(b"42 (x").is_none());
    }

    #[test]
    fn numbers_saturate() {
        assert_eq!(parse_u64(b"99999999999999999999999"), Some(u64::MAX));
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
    }

    /// A small deterministic fuzzer: mutations of real samples must never panic.
    #[test]
    fn mutated_inputs_never_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let seeds: [&[u8]; 5] = [STAT, DISK, NET, MEM, b"0.45 0.20 0.07 3/97 6963\n"];
        for round in 0..4000 {
            let mut buf = seeds[round % seeds.len()].to_vec();
            for _ in 0..(rnd() % 8) {
                let len = buf.len();
                let i = (rnd() as usize) % len.max(1);
                match rnd() % 4 {
                    0 if len > 0 => {
                        let b = rnd() as u8;
                        buf[i] = b;
                    }
                    1 if len > 0 => {
                        buf.remove(i);
                    }
                    2 => buf.insert(i.min(buf.len()), b"\n :/)\0\t9"[(rnd() % 8) as usize]),
                    _ => buf.truncate(i),
                }
            }
            let _ = stat_cpus(&buf).count();
            let _ = stat_counters(&buf);
            let _ = diskstats(&buf).count();
            let _ = net_dev(&buf).count();
            let _ = meminfo(&buf).count();
            let _ = loadavg(&buf);
            let _ = cmdline_args(&buf).count();
            let _ = pid_stat(&buf);
        }
    }
}
