//! The collectors: one [`Sampler::tick`] reads `/proc/stat`, `/proc/meminfo`,
//! `/proc/diskstats`, `/proc/net/dev` and `/proc/loadavg` and hands one counter record per
//! CPU, memory, disk, interface, load and scheduler to `emit`.
//!
//! Cost: each file stays open and is re-read from offset 0 into one reused buffer; the
//! per-device tables and record names are built when a device first appears, so a steady-state
//! tick allocates nothing. The first tick only takes the baseline (every rate is "since the
//! previous tick"), so records start one interval after the service.
//!
//! Units (see the README): CPU in percent of the last interval; memory in kB; disk and network
//! counters are deltas over the last interval (bytes, operations, packets, ms); load averages
//! as the kernel gives them.

use crate::proc::{self, CpuTimes, DISK_FIELDS, NET_FIELDS};
use dftracer_core::{Arg, Value};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Receives one record: name, category and args (at most 32).
pub type Emit<'a> = dyn FnMut(&[u8], &[u8], &[Arg]) + 'a;

/// A `/proc` file kept open and re-read from the start.
struct ProcFile {
    path: PathBuf,
    file: Option<File>,
}

impl ProcFile {
    fn open(path: PathBuf) -> ProcFile {
        let file = File::open(&path).ok();
        ProcFile { path, file }
    }

    /// Reads the whole file into `buf`; returns the length read, `None` if it cannot be read.
    fn read(&mut self, buf: &mut Vec<u8>) -> Option<usize> {
        for attempt in 0..2 {
            if self.file.is_none() || attempt == 1 {
                self.file = File::open(&self.path).ok();
            }
            if let Some(n) = self.file.as_ref().and_then(|f| read_all_at(f, buf).ok()) {
                return Some(n);
            }
        }
        None
    }
}

/// Reads `f` from offset 0 to EOF into `buf`, whose length is its usable size: it is zeroed
/// once and only grows (doubling) for a file larger than any seen before, so a steady-state
/// read neither allocates nor clears memory. (`/proc` seq files hand out about a page per
/// `read`, hence the loop.)
fn read_all_at(f: &File, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.len() < 4096 {
        buf.resize(4096, 0);
    }
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => return Ok(n),
            Ok(r) => n += r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

struct CpuSlot {
    name: Box<[u8]>,
    prev: Option<CpuTimes>,
}

struct DiskSlot {
    name: Box<[u8]>,
    /// A whole device (listed in /sys/block); partitions are tracked but not reported.
    report: bool,
    prev: [u64; DISK_FIELDS],
    seen: bool,
}

struct NetSlot {
    iface: Box<[u8]>,
    /// `net-<iface>`.
    name: Box<[u8]>,
    prev: [u64; NET_FIELDS],
    seen: bool,
}

/// The `/proc/meminfo` keys reported, all in kB, under their kernel names.
pub const MEM_KEYS: [&str; 22] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "SwapTotal",
    "SwapFree",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Mapped",
    "Shmem",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "CommitLimit",
    "Committed_AS",
];

const CPU_KEYS: [&str; 10] = [
    "user_pct",
    "nice_pct",
    "system_pct",
    "idle_pct",
    "iowait_pct",
    "irq_pct",
    "softirq_pct",
    "steal_pct",
    "guest_pct",
    "guest_nice_pct",
];

/// What a tick produced (for tests and the benchmark's bytes-per-sample figure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickStats {
    pub records: usize,
}

pub struct Sampler {
    stat: ProcFile,
    meminfo: ProcFile,
    diskstats: ProcFile,
    netdev: ProcFile,
    loadavg: ProcFile,
    sys_block: PathBuf,
    has_sys_block: bool,
    buf: Vec<u8>,
    cpus: Vec<CpuSlot>,
    disks: Vec<DiskSlot>,
    nets: Vec<NetSlot>,
    sched_prev: Option<proc::StatCounters>,
    last: Option<Instant>,
}

impl Sampler {
    /// Collectors over the real `/proc` and `/sys`.
    pub fn new() -> Sampler {
        Sampler::with_roots(Path::new("/proc"), Path::new("/sys"))
    }

    /// Collectors over other roots (tests use directories of captured files).
    pub fn with_roots(proc_root: &Path, sys_root: &Path) -> Sampler {
        let sys_block = sys_root.join("block");
        Sampler {
            stat: ProcFile::open(proc_root.join("stat")),
            meminfo: ProcFile::open(proc_root.join("meminfo")),
            diskstats: ProcFile::open(proc_root.join("diskstats")),
            netdev: ProcFile::open(proc_root.join("net/dev")),
            loadavg: ProcFile::open(proc_root.join("loadavg")),
            has_sys_block: sys_block.is_dir(),
            sys_block,
            buf: vec![0; 4096],
            cpus: Vec::new(),
            disks: Vec::new(),
            nets: Vec::new(),
            sched_prev: None,
            last: None,
        }
    }

    /// Number of CPUs seen so far (for sizing the tracer's ring).
    pub fn cpu_count(&self) -> usize {
        self.cpus.len().saturating_sub(1)
    }

    /// Records per tick (after the baseline), an upper estimate.
    pub fn records_per_tick(&self) -> usize {
        self.cpus.len() + self.disks.iter().filter(|d| d.report).count() + self.nets.len() + 3
    }

    /// Reads every source; emits records for everything that has a previous reading.
    pub fn tick(&mut self, emit: &mut Emit) -> TickStats {
        let now = Instant::now();
        let elapsed_ms = self
            .last
            .map(|t| now.duration_since(t).as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        let baseline = self.last.is_none();
        self.last = Some(now);
        let mut buf = std::mem::take(&mut self.buf);
        let mut st = TickStats::default();
        if let Some(n) = self.stat.read(&mut buf) {
            st.records += self.cpu(&buf[..n], emit);
            st.records += self.sched(&buf[..n], emit);
        }
        if !baseline {
            if let Some(n) = self.meminfo.read(&mut buf) {
                st.records += memory(&buf[..n], emit);
            }
        }
        if let Some(n) = self.diskstats.read(&mut buf) {
            st.records += self.disks(&buf[..n], elapsed_ms, emit);
        }
        if let Some(n) = self.netdev.read(&mut buf) {
            st.records += self.nets(&buf[..n], emit);
        }
        if !baseline {
            if let Some(n) = self.loadavg.read(&mut buf) {
                st.records += load(&buf[..n], emit);
            }
        }
        self.buf = buf;
        st
    }

    /// Emits the records that need no previous reading (memory, load) right away; the
    /// service does this once at startup so that the trace starts with a sample.
    pub fn instant(&mut self, emit: &mut Emit) -> TickStats {
        let mut buf = std::mem::take(&mut self.buf);
        let mut st = TickStats::default();
        if let Some(n) = self.meminfo.read(&mut buf) {
            st.records += memory(&buf[..n], emit);
        }
        if let Some(n) = self.loadavg.read(&mut buf) {
            st.records += load(&buf[..n], emit);
        }
        self.buf = buf;
        st
    }

    fn cpu(&mut self, text: &[u8], emit: &mut Emit) -> usize {
        let mut n = 0;
        for line in proc::stat_cpus(text) {
            let idx = match line.cpu {
                None => 0,
                Some(c) => c as usize + 1,
            };
            if idx > 4096 {
                continue; // nonsense; keeps the table bounded
            }
            while self.cpus.len() <= idx {
                let name = match self.cpus.len() {
                    0 => "cpu".to_string(),
                    i => format!("cpu-{}", i - 1),
                };
                self.cpus.push(CpuSlot {
                    name: name.into_bytes().into(),
                    prev: None,
                });
            }
            let slot = &mut self.cpus[idx];
            if let Some(prev) = slot.prev {
                let mut d = [0u64; 10];
                for (i, v) in d.iter_mut().enumerate() {
                    *v = line.times[i].saturating_sub(prev[i]);
                }
                // guest and guest_nice are already inside user and nice: the first eight
                // states partition the interval, so their percentages sum to 100.
                let total: u64 = d[..8].iter().fold(0u64, |a, &b| a.saturating_add(b));
                if total > 0 {
                    let mut args = [Arg::new("", Value::Float(0.0)); 10];
                    for (i, a) in args.iter_mut().enumerate() {
                        *a = Arg::new(CPU_KEYS[i], Value::Float(pct(d[i], total)));
                    }
                    emit(&slot.name, b"sys", &args);
                    n += 1;
                }
            }
            slot.prev = Some(line.times);
        }
        n
    }

    fn sched(&mut self, text: &[u8], emit: &mut Emit) -> usize {
        let cur = proc::stat_counters(text);
        let prev = self.sched_prev.replace(cur);
        let Some(p) = prev else { return 0 };
        let args = [
            Arg::new("procs_running", Value::UInt(cur.procs_running)),
            Arg::new("procs_blocked", Value::UInt(cur.procs_blocked)),
            Arg::new(
                "forks",
                Value::UInt(cur.processes.saturating_sub(p.processes)),
            ),
            Arg::new("ctx_switches", Value::UInt(cur.ctxt.saturating_sub(p.ctxt))),
            Arg::new("interrupts", Value::UInt(cur.intr.saturating_sub(p.intr))),
        ];
        emit(b"sched", b"sys", &args);
        1
    }

    fn disks(&mut self, text: &[u8], elapsed_ms: f64, emit: &mut Emit) -> usize {
        for d in &mut self.disks {
            d.seen = false;
        }
        let mut n = 0;
        for line in proc::diskstats(text) {
            if skip_disk(line.name) {
                continue;
            }
            let i = match self.disks.iter().position(|d| *d.name == *line.name) {
                Some(i) => i,
                None => {
                    let report = !self.has_sys_block || is_whole_disk(&self.sys_block, line.name);
                    self.disks.push(DiskSlot {
                        name: line.name.into(),
                        report,
                        prev: line.stats,
                        seen: true,
                    });
                    continue;
                }
            };
            let slot = &mut self.disks[i];
            slot.seen = true;
            let prev = std::mem::replace(&mut slot.prev, line.stats);
            if !slot.report {
                continue;
            }
            let d = |k: usize| line.stats[k].saturating_sub(prev[k]);
            let busy = if elapsed_ms > 0.0 {
                round2((d(9) as f64 * 100.0 / elapsed_ms).min(100.0))
            } else {
                0.0
            };
            let args = [
                Arg::new("reads_completed", Value::UInt(d(0))),
                Arg::new("bytes_read", Value::UInt(d(2).saturating_mul(512))),
                Arg::new("writes_completed", Value::UInt(d(4))),
                Arg::new("bytes_written", Value::UInt(d(6).saturating_mul(512))),
                Arg::new("ios_in_progress", Value::UInt(line.stats[8])),
                Arg::new("read_ms", Value::UInt(d(3))),
                Arg::new("write_ms", Value::UInt(d(7))),
                Arg::new("busy_pct", Value::Float(busy)),
            ];
            emit(&slot.name, b"io", &args);
            n += 1;
        }
        self.disks.retain(|d| d.seen);
        n
    }

    fn nets(&mut self, text: &[u8], emit: &mut Emit) -> usize {
        for s in &mut self.nets {
            s.seen = false;
        }
        let mut n = 0;
        for line in proc::net_dev(text) {
            if line.name == b"lo" {
                continue;
            }
            let i = match self.nets.iter().position(|s| *s.iface == *line.name) {
                Some(i) => i,
                None => {
                    let mut name = b"net-".to_vec();
                    name.extend_from_slice(line.name);
                    self.nets.push(NetSlot {
                        iface: line.name.into(),
                        name: name.into(),
                        prev: line.stats,
                        seen: true,
                    });
                    continue;
                }
            };
            let slot = &mut self.nets[i];
            slot.seen = true;
            let prev = std::mem::replace(&mut slot.prev, line.stats);
            let d = |k: usize| Value::UInt(line.stats[k].saturating_sub(prev[k]));
            let args = [
                Arg::new("bytes_recv", d(0)),
                Arg::new("packets_recv", d(1)),
                Arg::new("rx_errors", d(2)),
                Arg::new("rx_dropped", d(3)),
                Arg::new("bytes_sent", d(8)),
                Arg::new("packets_sent", d(9)),
                Arg::new("tx_errors", d(10)),
                Arg::new("tx_dropped", d(11)),
                Arg::new("collisions", d(13)),
            ];
            emit(&slot.name, b"net", &args);
            n += 1;
        }
        self.nets.retain(|s| s.seen);
        n
    }
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

fn memory(text: &[u8], emit: &mut Emit) -> usize {
    let mut vals = [None::<u64>; MEM_KEYS.len()];
    for (k, v) in proc::meminfo(text) {
        if let Some(i) = MEM_KEYS.iter().position(|m| m.as_bytes() == k) {
            vals[i] = Some(v);
        }
    }
    let get = |k: &str| MEM_KEYS.iter().position(|m| *m == k).and_then(|i| vals[i]);
    let Some(total) = get("MemTotal") else {
        return 0;
    };
    // Kernels before 3.14 have no MemAvailable: estimate it the classic way.
    let available = get("MemAvailable").unwrap_or_else(|| {
        get("MemFree").unwrap_or(0) + get("Buffers").unwrap_or(0) + get("Cached").unwrap_or(0)
    });
    let used = total.saturating_sub(available);
    let mut args = [Arg::new("", Value::UInt(0)); MEM_KEYS.len() + 2];
    let mut n = 0;
    for (i, v) in vals.iter().enumerate() {
        if let Some(v) = v {
            args[n] = Arg::new(MEM_KEYS[i], Value::UInt(*v));
            n += 1;
        }
    }
    args[n] = Arg::new("used", Value::UInt(used));
    args[n + 1] = Arg::new("used_pct", Value::Float(pct(used, total)));
    emit(b"memory", b"sys", &args[..n + 2]);
    1
}

fn load(text: &[u8], emit: &mut Emit) -> usize {
    let Some(l) = proc::loadavg(text) else {
        return 0;
    };
    let args = [
        Arg::new("load_1m", Value::Float(l.load1)),
        Arg::new("load_5m", Value::Float(l.load5)),
        Arg::new("load_15m", Value::Float(l.load15)),
        Arg::new("runnable", Value::UInt(l.runnable)),
        Arg::new("total", Value::UInt(l.total)),
    ];
    emit(b"loadavg", b"sys", &args);
    1
}

/// 100 × part / total, rounded to 0.01 (jiffies give at best 1 % per CPU-second anyway, and
/// short numbers keep the trace small).
fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    round2(part as f64 * 100.0 / total as f64)
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Loop devices and RAM disks (`loop*`, `ram*`, `zram*`) carry no storage traffic.
fn skip_disk(name: &[u8]) -> bool {
    name.starts_with(b"loop") || name.starts_with(b"ram") || name.starts_with(b"zram")
}

/// Whole devices are the entries of /sys/block (`cciss/c0d0` appears there as `cciss!c0d0`);
/// partitions are not, and reporting both would count every byte twice.
fn is_whole_disk(sys_block: &Path, name: &[u8]) -> bool {
    let name: Vec<u8> = name
        .iter()
        .map(|&b| if b == b'/' { b'!' } else { b })
        .collect();
    let Ok(name) = std::str::from_utf8(&name) else {
        return false;
    };
    if name.is_empty() || name == "." || name == ".." {
        return false;
    }
    sys_block.join(name).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    type Rec = (String, String, Vec<(String, f64)>);

    fn collect(s: &mut Sampler) -> Vec<Rec> {
        let mut out = Vec::new();
        s.tick(&mut |name, cat, args| {
            let a = args
                .iter()
                .map(|a| {
                    let v = match a.value {
                        Value::Float(f) => f,
                        Value::UInt(u) => u as f64,
                        Value::Int(i) => i as f64,
                        _ => f64::NAN,
                    };
                    (String::from_utf8_lossy(a.key).into_owned(), v)
                })
                .collect();
            out.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(cat).into_owned(),
                a,
            ));
        });
        out
    }

    fn write_fixture(dir: &Path, stat: &str, disk: &str, net: &str) {
        std::fs::create_dir_all(dir.join("proc/net")).unwrap();
        std::fs::create_dir_all(dir.join("sys/block/vda")).unwrap();
        std::fs::write(dir.join("proc/stat"), stat).unwrap();
        std::fs::write(dir.join("proc/diskstats"), disk).unwrap();
        std::fs::write(dir.join("proc/net/dev"), net).unwrap();
        std::fs::write(
            dir.join("proc/meminfo"),
            "MemTotal: 1000 kB\nMemFree: 300 kB\nMemAvailable: 400 kB\nActive(anon): 5 kB\n",
        )
        .unwrap();
        std::fs::write(dir.join("proc/loadavg"), "1.50 0.75 0.25 2/300 999\n").unwrap();
    }

    const NET_HEAD: &str = "Inter-|   Receive\n face |bytes\n";

    #[test]
    fn deltas_over_the_last_interval() {
        let dir = std::env::temp_dir().join(format!("dft-svc-collect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_fixture(
            &dir,
            "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\nctxt 10\nprocesses 5\n",
            "   7 0 loop0 1 0 0 0 0 0 0 0 0 0 0\n 254 0 vda 10 0 100 5 20 0 200 7 0 50 0\n 254 1 vda1 10 0 100 5 20 0 200 7 0 50 0\n",
            &format!("{NET_HEAD}    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n  eth0: 1000 10 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n"),
        );
        let mut s = Sampler::with_roots(&dir.join("proc"), &dir.join("sys"));
        assert!(collect(&mut s).is_empty(), "the first tick is the baseline");
        write_fixture(
            &dir,
            "cpu  150 0 150 900 0 0 0 0 0 0\ncpu0 175 0 100 825 0 0 0 0 0 0\nctxt 30\nprocesses 6\n",
            "   7 0 loop0 9 0 0 0 0 0 0 0 0 0 0\n 254 0 vda 14 0 108 6 21 0 202 8 2 60 0\n 254 1 vda1 14 0 108 6 21 0 202 8 2 60 0\n",
            &format!("{NET_HEAD}    lo: 9 9 0 0 0 0 0 0 9 9 0 0 0 0 0 0\n  eth0: 3000 30 1 0 0 0 0 0 600 6 0 2 0 0 0 0\n"),
        );
        let recs = collect(&mut s);
        let get = |n: &str| {
            recs.iter()
                .find(|r| r.0 == n)
                .unwrap_or_else(|| panic!("{n}: {recs:?}"))
        };
        let arg = |r: &Rec, k: &str| r.2.iter().find(|a| a.0 == k).unwrap().1;
        let cpu = get("cpu");
        assert_eq!(cpu.1, "sys");
        assert_eq!(arg(cpu, "user_pct"), 25.0);
        assert_eq!(arg(cpu, "system_pct"), 25.0);
        assert_eq!(arg(cpu, "idle_pct"), 50.0);
        let cpu0 = get("cpu-0");
        assert_eq!(arg(cpu0, "user_pct"), 75.0);
        assert_eq!(arg(cpu0, "idle_pct"), 25.0);
        let vda = get("vda");
        assert_eq!(vda.1, "io");
        assert_eq!(arg(vda, "reads_completed"), 4.0);
        assert_eq!(arg(vda, "bytes_read"), 8.0 * 512.0);
        assert_eq!(arg(vda, "bytes_written"), 2.0 * 512.0);
        assert_eq!(arg(vda, "ios_in_progress"), 2.0);
        assert!(
            recs.iter().all(|r| r.0 != "vda1" && r.0 != "loop0"),
            "{recs:?}"
        );
        let eth = get("net-eth0");
        assert_eq!(eth.1, "net");
        assert_eq!(arg(eth, "bytes_recv"), 2000.0);
        assert_eq!(arg(eth, "tx_dropped"), 2.0);
        assert!(recs.iter().all(|r| r.0 != "net-lo"));
        let mem = get("memory");
        assert_eq!(arg(mem, "MemTotal"), 1000.0);
        assert_eq!(arg(mem, "used"), 600.0);
        assert_eq!(arg(mem, "used_pct"), 60.0);
        assert!(mem.2.iter().all(|a| !a.0.contains('(')));
        let l = get("loadavg");
        assert_eq!(arg(l, "load_1m"), 1.5);
        assert_eq!(arg(l, "total"), 300.0);
        let sched = get("sched");
        assert_eq!(arg(sched, "ctx_switches"), 20.0);
        assert_eq!(arg(sched, "forks"), 1.0);
        assert!(recs.iter().all(|r| r.2.len() <= 32));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn real_proc_percentages_sum_to_100() {
        let mut s = Sampler::new();
        collect(&mut s);
        std::thread::sleep(std::time::Duration::from_millis(60));
        for r in collect(&mut s).iter().filter(|r| r.0.starts_with("cpu")) {
            let sum: f64 = r.2[..8].iter().map(|a| a.1).sum();
            assert!((sum - 100.0).abs() < 0.1, "{r:?}");
        }
    }
}
