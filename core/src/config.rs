//! Every `DFTRACER_*` knob in one table: its environment variable, its YAML key, its default
//! and its meaning. `KNOBS` is the single source the README's table is checked against.
//!
//! Parsing rules (where we differ from the reference, see `FORMAT.md`):
//! - every variable is read whether or not `DFTRACER_ENABLE` is set;
//! - booleans accept `1/true/yes/on` and `0/false/no/off` (any case); anything else gives one
//!   warning on stderr and the default;
//! - integers must parse completely; garbage gives a warning and the default (never `atoi`'s 0);
//! - environment overrides YAML; a YAML file that cannot be read or parsed disables tracing
//!   with one message (never an abort).

use std::fmt;

/// Unit of every timestamp and duration in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeMetric {
    Ns,
    Us,
    Ms,
    Sec,
}

impl TimeMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeMetric::Ns => "NS",
            TimeMetric::Us => "US",
            TimeMetric::Ms => "MS",
            TimeMetric::Sec => "SEC",
        }
    }
    /// The unit's code in one byte (the tracer's published unit, a ring record's).
    pub(crate) const fn code(self) -> u8 {
        match self {
            TimeMetric::Ns => 0,
            TimeMetric::Us => 1,
            TimeMetric::Ms => 2,
            TimeMetric::Sec => 3,
        }
    }
    /// The unit of [`TimeMetric::code`] (its two low bits).
    pub(crate) const fn from_code(c: u8) -> TimeMetric {
        match c & 3 {
            0 => TimeMetric::Ns,
            2 => TimeMetric::Ms,
            3 => TimeMetric::Sec,
            _ => TimeMetric::Us,
        }
    }
    /// Units per second.
    pub fn per_second(self) -> u64 {
        match self {
            TimeMetric::Ns => 1_000_000_000,
            TimeMetric::Us => 1_000_000,
            TimeMetric::Ms => 1_000,
            TimeMetric::Sec => 1,
        }
    }
    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "NS" => Some(TimeMetric::Ns),
            "US" => Some(TimeMetric::Us),
            "MS" => Some(TimeMetric::Ms),
            "SEC" | "S" => Some(TimeMetric::Sec),
            _ => None,
        }
    }
}

/// Who initialises the tracer automatically (`DFTRACER_INIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitMode {
    /// The API (`initialize`) starts tracing.
    Function,
    /// The LD_PRELOAD constructor starts tracing.
    Preload,
    /// Anything else: nobody binds I/O interception.
    None,
}

impl InitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InitMode::Function => "FUNCTION",
            InitMode::Preload => "PRELOAD",
            InitMode::None => "NONE",
        }
    }
}

/// Which complete events are aggregated when `DFTRACER_ENABLE_AGGREGATION` is on.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    /// FULL: every event (but `dftracer`-category ones).
    All,
    /// SELECTIVE: those the rules pick.
    Rules(std::sync::Arc<crate::rules::Rules>),
    /// SELECTIVE with a rules file that could not be used: none (said once on stderr).
    Off,
}

/// Resolved configuration. Built once by [`Config::from_env`]; frontends may adjust fields
/// before handing it to [`crate::init`].
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub enable: bool,
    pub init: InitMode,
    /// File prefix; `None` means `./trace`.
    pub log_file: Option<String>,
    /// `:`-separated data directories as given (`all` = everything); `None` when unset.
    pub data_dirs: Option<String>,
    pub metadata: bool,
    pub time_metric: TimeMetric,
    pub log_level: String,
    pub core_affinity: bool,
    pub gotcha_priority: i64,
    pub io: bool,
    pub posix: bool,
    pub stdio: bool,
    /// HDF5 interception (`DFTRACER_DISABLE_HDF5`).
    pub hdf5: bool,
    /// MPI-IO interception (`DFTRACER_DISABLE_MPIIO`).
    pub mpiio: bool,
    pub compression: bool,
    pub tids: bool,
    pub bind_signals: bool,
    pub write_buffer_size: usize,
    pub trace_interval_ms: u64,
    pub libuv_threads: u64,
    pub aggregation_enable: bool,
    /// Low-information calls (`isatty`, `fstat` of a traced fd) counted, not written.
    pub fold_calls: bool,
    pub aggregation_type: String,
    pub aggregation_file: Option<String>,
    /// Which events aggregation folds (derived from the three knobs above).
    pub aggregation_selection: Selection,
    pub throw_error: bool,
    /// Ours: the writer thread writes what it has at least this often (SIGKILL loses at most
    /// this much).
    pub flush_interval_ms: u64,
    /// Ours: bytes of each thread's ring.
    pub ring_size: usize,
    /// Ours: when a ring is full, drop (and count) instead of draining it on the producer.
    pub drop_when_full: bool,
    /// Read event times from the TSC when the kernel trusts it (see `clock`).
    pub tsc: bool,
    /// Ours: deflate level 0-10 of each gzip member.
    pub compression_level: u8,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enable: false,
            init: InitMode::Function,
            log_file: None,
            data_dirs: None,
            metadata: true,
            time_metric: TimeMetric::Us,
            log_level: "WARN".into(),
            core_affinity: false,
            gotcha_priority: 1,
            io: true,
            posix: true,
            stdio: true,
            hdf5: true,
            mpiio: true,
            compression: true,
            tids: true,
            bind_signals: true,
            write_buffer_size: 1024 * 1024,
            trace_interval_ms: 1000,
            libuv_threads: 1,
            aggregation_enable: false,
            fold_calls: true,
            aggregation_type: "FULL".into(),
            aggregation_file: None,
            aggregation_selection: Selection::All,
            throw_error: false,
            flush_interval_ms: 1000,
            ring_size: 1 << 20,
            drop_when_full: false,
            tsc: true,
            compression_level: 1,
        }
    }
}

/// Smallest ring accepted: it must hold the largest possible record twice over.
pub const MIN_RING_SIZE: usize = 1 << 19;
/// Largest ring accepted (per thread).
pub const MAX_RING_SIZE: usize = 1 << 30;

/// A configuration problem. Never fatal to the host: the caller prints it and carries on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The YAML file named by `DFTRACER_CONFIGURATION` could not be read.
    YamlRead { path: String, reason: String },
    /// The YAML file could not be parsed.
    YamlParse { path: String, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::YamlRead { path, reason } => write!(
                f,
                "DFTRACER_CONFIGURATION={path}: cannot read ({reason}); tracing disabled"
            ),
            ConfigError::YamlParse { path, reason } => write!(
                f,
                "DFTRACER_CONFIGURATION={path}: invalid YAML ({reason}); tracing disabled"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// One knob: environment variable, YAML key path, default (as text) and meaning.
pub struct Knob {
    pub env: &'static str,
    pub yaml: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
    /// The YAML key has the opposite sense of the variable (`DFTRACER_DISABLE_TIDS=1` is
    /// `features.tid: false`).
    yaml_inverted: bool,
    set: fn(&mut Config, &str, &mut Vec<String>),
    get: fn(&Config) -> String,
}

/// The one shape of a bad-value warning: the variable, the value given, what was expected and
/// the value used instead (every knob's warning starts with its variable name: `from_env`
/// prints each knob's warning once per process).
fn warn_bad(warnings: &mut Vec<String>, env: &str, raw: &str, expect: &str, using: &str) {
    warnings.push(format!("{env}={raw:?} is not {expect}; using {using}"));
}

/// `1/true/yes/on` and `0/false/no/off`, any case.
pub fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Some(true),
        "0" | "false" | "no" | "off" | "n" => Some(false),
        _ => None,
    }
}

fn parse_u64(raw: &str) -> Option<u64> {
    raw.trim().parse::<u64>().ok()
}

macro_rules! bool_knob {
    ($env:literal, $yaml:literal, $default:literal, $meaning:literal, $field:ident, $invert:expr) => {
        Knob {
            env: $env,
            yaml: $yaml,
            default: $default,
            meaning: $meaning,
            yaml_inverted: $invert,
            set: |c, raw, w| match parse_bool(raw) {
                Some(b) => c.$field = b != $invert,
                None => warn_bad(
                    w,
                    $env,
                    raw,
                    "a boolean (1/true/yes/on or 0/false/no/off)",
                    &((c.$field != $invert) as u8).to_string(),
                ),
            },
            get: |c| ((c.$field != $invert) as u8).to_string(),
        }
    };
}

/// An unsigned integer knob. `$domain` describes the accepted values; `$fix` maps a parsed
/// value outside them to the value used instead (`None`: the value is accepted as is).
macro_rules! uint_knob {
    ($env:literal, $yaml:literal, $default:literal, $meaning:literal, $field:ident, $ty:ty,
     $domain:literal, $fix:expr) => {
        Knob {
            env: $env,
            yaml: $yaml,
            default: $default,
            meaning: $meaning,
            yaml_inverted: false,
            set: |c, raw, w| match parse_u64(raw) {
                Some(v) => {
                    let fix: fn(u64) -> Option<u64> = $fix;
                    let used = match fix(v) {
                        Some(u) => {
                            warn_bad(w, $env, raw, $domain, &u.to_string());
                            u
                        }
                        None => v,
                    };
                    // Saturate (never wrap); every fix keeps values inside the type.
                    c.$field = <$ty>::try_from(used).unwrap_or(<$ty>::MAX);
                }
                None => warn_bad(
                    w,
                    $env,
                    raw,
                    concat!("a non-negative integer (", $domain, ")"),
                    &c.$field.to_string(),
                ),
            },
            get: |c| c.$field.to_string(),
        }
    };
}

/// The table. Order is the order of the README table.
pub static KNOBS: &[Knob] = &[
    bool_knob!("DFTRACER_ENABLE", "enable", "0", "turn tracing on", enable, false),
    Knob {
        env: "DFTRACER_INIT",
        yaml: "tracer.init",
        default: "FUNCTION",
        meaning: "FUNCTION: the API starts tracing and binds I/O in process; PRELOAD: the LD_PRELOAD library starts tracing and owns I/O; HYBRID or NONE: no I/O interception",
        yaml_inverted: false,
        set: |c, raw, w| {
            c.init = match raw.trim().to_ascii_uppercase().as_str() {
                "FUNCTION" => InitMode::Function,
                "PRELOAD" => InitMode::Preload,
                // HYBRID: a value of the reference's (and of tests written for it), which binds
                // nothing there either.
                "NONE" | "HYBRID" => InitMode::None,
                _ => {
                    // The reference's rule: any other value means NONE.
                    warn_bad(
                        w,
                        "DFTRACER_INIT",
                        raw,
                        "FUNCTION, PRELOAD, HYBRID or NONE",
                        "NONE (nothing starts I/O interception)",
                    );
                    InitMode::None
                }
            }
        },
        get: |c| c.init.as_str().into(),
    },
    Knob {
        env: "DFTRACER_LOG_FILE",
        yaml: "tracer.log_file",
        default: "(unset: ./trace)",
        meaning: "trace file prefix; files are <prefix>-<hash>-<app, preload or fork>.pfw.gz",
        yaml_inverted: false,
        set: |c, raw, _| c.log_file = (!raw.is_empty()).then(|| raw.to_string()),
        get: |c| c.log_file.clone().unwrap_or_default(),
    },
    Knob {
        env: "DFTRACER_DATA_DIR",
        yaml: "tracer.data_dirs",
        default: "(unset)",
        meaning: ":-separated directories whose files are traced (whole path components); all = every file",
        yaml_inverted: false,
        set: |c, raw, _| c.data_dirs = (!raw.is_empty()).then(|| raw.to_string()),
        get: |c| c.data_dirs.clone().unwrap_or_default(),
    },
    bool_knob!("DFTRACER_INC_METADATA", "features.metadata", "1", "write args, FH/SH records and start/end details", metadata, false),
    Knob {
        env: "DFTRACER_TIME_METRIC",
        yaml: "tracer.time_metric",
        default: "US",
        meaning: "unit of ts and dur: NS, US, MS or SEC",
        yaml_inverted: false,
        set: |c, raw, w| match TimeMetric::parse(raw) {
            Some(m) => c.time_metric = m,
            None => warn_bad(
                w,
                "DFTRACER_TIME_METRIC",
                raw,
                "one of NS, US, MS, SEC",
                c.time_metric.as_str(),
            ),
        },
        get: |c| c.time_metric.as_str().into(),
    },
    Knob {
        env: "DFTRACER_LOG_LEVEL",
        yaml: "tracer.log_level",
        default: "WARN",
        meaning: "stderr verbosity: ERROR, WARN, INFO or DEBUG",
        yaml_inverted: false,
        set: |c, raw, w| match raw.trim().to_ascii_uppercase().as_str() {
            l @ ("ERROR" | "WARN" | "INFO" | "DEBUG") => c.log_level = l.into(),
            "WARNING" => c.log_level = "WARN".into(),
            _ => warn_bad(
                w,
                "DFTRACER_LOG_LEVEL",
                raw,
                "one of ERROR, WARN, INFO, DEBUG",
                &c.log_level.clone(),
            ),
        },
        get: |c| c.log_level.clone(),
    },
    bool_knob!("DFTRACER_SET_CORE_AFFINITY", "features.core_affinity", "0", "accepted for compatibility; no effect", core_affinity, false),
    Knob {
        env: "DFTRACER_GOTCHA_PRIORITY",
        yaml: "gotcha.priority",
        default: "1",
        meaning: "accepted for compatibility; no effect",
        yaml_inverted: false,
        set: |c, raw, w| match raw.trim().parse::<i64>() {
            Ok(v) => c.gotcha_priority = v,
            Err(_) => warn_bad(
                w,
                "DFTRACER_GOTCHA_PRIORITY",
                raw,
                "an integer",
                &c.gotcha_priority.to_string(),
            ),
        },
        get: |c| c.gotcha_priority.to_string(),
    },
    bool_knob!("DFTRACER_DISABLE_IO", "features.io.enable", "0", "1 disables all I/O interception (YAML: enable: false)", io, true),
    bool_knob!("DFTRACER_DISABLE_POSIX", "features.io.posix", "0", "1 disables POSIX interception", posix, true),
    bool_knob!("DFTRACER_DISABLE_STDIO", "features.io.stdio", "0", "1 disables stdio interception", stdio, true),
    bool_knob!("DFTRACER_DISABLE_HDF5", "features.io.hdf5", "0", "1 disables HDF5 interception (the file, dataset, group and attribute calls of a libhdf5 1.10 or later loaded in the process, bound at run time: category HDF5, FORMAT.md)", hdf5, true),
    bool_knob!("DFTRACER_DISABLE_MPIIO", "features.io.mpiio", "0", "1 disables MPI-IO interception (MPI_File_open, _close, the reads and writes (blocking, nonblocking, shared and ordered), _sync, _set_size, _seek, _seek_shared, _set_view of the MPI library loaded in the process, bound at run time: category MPIIO, FORMAT.md)", mpiio, true),
    bool_knob!("DFTRACER_FOLD_CALLS", "features.io.fold_calls", "1", "calls on a traced fd that say nothing about its I/O (`isatty`; `fstat`, `fstat64`, `__fxstat*`, and `fstatat`, `__fxstatat*` and `statx` of the fd itself (`\"\"`, `AT_EMPTY_PATH`)), when they return 0, are counted in one ph 3 record per name, thread and TRACE_INTERVAL_MS bucket (`dft_cnt`, `dur_*`) instead of written one by one (FORMAT.md \"Folded calls\"); 0 writes each", fold_calls, false),
    bool_knob!("DFTRACER_TRACE_COMPRESSION", "tracer.compression", "1", "gzip members (.pfw.gz); 0 writes plain .pfw", compression, false),
    bool_knob!("DFTRACER_DISABLE_TIDS", "features.tid", "0", "1 writes tid 0 (not inverted, unlike the reference)", tids, true),
    bool_knob!("DFTRACER_BIND_SIGNALS", "internal.bind_signals", "1", "finish the trace when a catchable signal whose default action ends the process arrives while it has that action (TERM INT HUP QUIT ABRT PIPE ALRM USR1 USR2 VTALRM PROF XCPU XFSZ, and the faults), then die by it exactly as SIG_DFL would; the program still reads SIG_DFL. 0 installs nothing", bind_signals, false),
    uint_knob!("DFTRACER_WRITE_BUFFER_SIZE", "internal.write_buffer_size", "1048576", "bytes of JSON per gzip member before it is cut (reference: 16777216; ours is smaller so that compressing a member never outlasts a thread's ring)", write_buffer_size, usize, "any size; 0 cuts a member per event", |_| None),
    uint_knob!("DFTRACER_TRACE_INTERVAL_MS", "features.interval", "1000", "service sampling period", trace_interval_ms, u64, "at least 1", |v| (v == 0).then_some(1000)),
    uint_knob!("DFTRACER_LIBUV_THREADS", "tracer.libuv_threads", "1", "accepted for compatibility; the service samples on one thread", libuv_threads, u64, "at least 1", |v| (v == 0).then_some(1)),
    bool_knob!("DFTRACER_ENABLE_AGGREGATION", "features.aggregation.enable", "0", "write one ph 3 record per name, cat, thread and TRACE_INTERVAL_MS bucket instead of each event", aggregation_enable, false),
    Knob {
        env: "DFTRACER_AGGREGATION_TYPE",
        yaml: "features.aggregation.type",
        default: "FULL",
        meaning: "FULL aggregates every event; SELECTIVE only those the rules of DFTRACER_AGGREGATION_FILE pick (every event without a file, as the reference; syntax: FORMAT.md)",
        yaml_inverted: false,
        set: |c, raw, w| match raw.trim().to_ascii_uppercase().as_str() {
            t @ ("FULL" | "SELECTIVE") => c.aggregation_type = t.into(),
            _ => warn_bad(
                w,
                "DFTRACER_AGGREGATION_TYPE",
                raw,
                "FULL or SELECTIVE",
                &c.aggregation_type.clone(),
            ),
        },
        get: |c| c.aggregation_type.clone(),
    },
    Knob {
        env: "DFTRACER_AGGREGATION_FILE",
        yaml: "features.aggregation.file",
        default: "(unset)",
        meaning: "YAML rules file of SELECTIVE aggregation (`inclusion:` and `exclusion:` lists of rule strings over name, cat, app, tags.<key>, dur, ts, rank); a bad file is one error and no aggregation",
        yaml_inverted: false,
        set: |c, raw, _| c.aggregation_file = (!raw.is_empty()).then(|| raw.to_string()),
        get: |c| c.aggregation_file.clone().unwrap_or_default(),
    },
    bool_knob!("DFTRACER_ERROR", "internal.throw_error", "0", "accepted for compatibility; no effect", throw_error, false),
    uint_knob!("DFTRACER_FLUSH_INTERVAL_MS", "internal.flush_interval_ms", "1000", "ours: write buffered events at least this often (a SIGKILL loses at most this much)", flush_interval_ms, u64, "at least 1", |v| (v == 0).then_some(1)),
    uint_knob!("DFTRACER_RING_SIZE", "internal.ring_size", "1048576", "ours: bytes of each thread's event ring (min 524288)", ring_size, usize, "a power of two in 524288..=1073741824", |v| {
        let c = v.clamp(MIN_RING_SIZE as u64, MAX_RING_SIZE as u64).next_power_of_two();
        (c != v).then_some(c)
    }),
    bool_knob!("DFTRACER_DROP_WHEN_FULL", "internal.drop_when_full", "0", "ours: a full ring drops (and counts) events instead of draining on the producer", drop_when_full, false),
    bool_knob!("DFTRACER_TSC", "internal.tsc", "1", "ours: event times from the CPU time-stamp counter, calibrated against CLOCK_REALTIME, when the kernel uses the TSC as its clocksource; 0: always clock_gettime", tsc, false),
    uint_knob!("DFTRACER_COMPRESSION_LEVEL", "internal.compression_level", "1", "ours: deflate level 0-10 of each gzip member", compression_level, u8, "in 0..=10", |v| (v > 10).then_some(10)),
];

/// Environment variables that give a process its rank, as launchers set them, in the order
/// they are trusted: the MPI launchers' own first, the schedulers' last, because `mpirun`
/// inside a Slurm or Flux allocation hands its ranks the batch step's `SLURM_PROCID` (0 on
/// every rank) or the like, while the MPI variable is the rank's own.
pub const RANK_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_RANK", // Open MPI's mpirun (also with srun --mpi=pmix)
    "PMIX_RANK",            // any PMIx launcher: Open MPI 5 prterun, srun --mpi=pmix
    "PMI_RANK",             // MPICH/Hydra mpiexec, Intel MPI, Flux, srun --mpi=pmi2
    "FLUX_TASK_RANK",       // flux run
    "SLURM_PROCID",         // srun
];

/// Not a knob: the process's rank from its launcher's environment (the first of
/// [`RANK_VARS`] that holds a non-negative integer), recorded as `end.args.app.rank` so that
/// readers can group the files of a job by rank. `None` outside a launcher.
pub fn launcher_rank(getenv: impl Fn(&str) -> Option<String>) -> Option<i64> {
    RANK_VARS.iter().find_map(|k| {
        getenv(k)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&r| r >= 0)
    })
}

/// Reads the environment through `getenv` (the closure), then the YAML file it names.
/// Returns the config, warnings (one line each) and, for an unreadable YAML, the error that
/// turned tracing off.
pub fn resolve(
    getenv: impl Fn(&str) -> Option<String>,
) -> (Config, Vec<String>, Option<ConfigError>) {
    let mut cfg = Config::default();
    let mut warnings = Vec::new();
    let mut error = None;
    if let Some(path) = getenv("DFTRACER_CONFIGURATION").filter(|p| !p.is_empty()) {
        match std::fs::read_to_string(&path) {
            Err(e) => {
                error = Some(ConfigError::YamlRead {
                    path: path.clone(),
                    reason: e.to_string(),
                })
            }
            Ok(text) => {
                if let Err(reason) = apply_yaml(&mut cfg, &text, &mut warnings) {
                    error = Some(ConfigError::YamlParse { path, reason });
                }
            }
        }
    }
    for knob in KNOBS {
        if let Some(raw) = getenv(knob.env) {
            (knob.set)(&mut cfg, &raw, &mut warnings);
        }
    }
    cfg.normalize(&mut warnings);
    if error.is_some() {
        cfg.enable = false;
    }
    (cfg, warnings, error)
}

/// Applies YAML text (the reference's layout: `enable`, `tracer.*`, `features.*`,
/// `internal.*`, `gotcha.*`; `profiler.*` accepted as an alias of `tracer.*`).
pub fn apply_yaml(cfg: &mut Config, text: &str, warnings: &mut Vec<String>) -> Result<(), String> {
    use yaml_rust2::{Yaml, YamlLoader};
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Ok(());
    };
    if !matches!(doc, Yaml::Hash(_) | Yaml::Null) {
        return Err("top level is not a mapping".into());
    }
    fn lookup<'a>(doc: &'a Yaml, path: &str) -> Option<&'a Yaml> {
        let mut cur = doc;
        for part in path.split('.') {
            cur = &cur[part];
            if cur.is_badvalue() {
                return None;
            }
        }
        Some(cur)
    }
    fn scalar(y: &Yaml) -> Option<String> {
        match y {
            Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
            Yaml::Integer(i) => Some(i.to_string()),
            Yaml::Boolean(b) => Some(if *b { "1".into() } else { "0".into() }),
            Yaml::Array(items) => {
                // data_dirs may be a list.
                let parts: Vec<String> = items.iter().filter_map(scalar).collect();
                Some(parts.join(":"))
            }
            _ => None,
        }
    }
    for knob in KNOBS {
        let found = lookup(doc, knob.yaml).or_else(|| {
            knob.yaml
                .strip_prefix("tracer.")
                .and_then(|rest| lookup(doc, &format!("profiler.{rest}")))
        });
        if let Some(value) = found {
            match scalar(value) {
                Some(raw) if knob.yaml_inverted => match parse_bool(&raw) {
                    Some(b) => (knob.set)(cfg, if b { "0" } else { "1" }, warnings),
                    None => warnings.push(format!(
                        "{}: YAML key {} = {raw:?} is not a boolean; ignored",
                        knob.env, knob.yaml
                    )),
                },
                Some(raw) => (knob.set)(cfg, &raw, warnings),
                None if value.is_null() => {}
                None => warnings.push(format!(
                    "{}: YAML key {} has an unusable value; ignored",
                    knob.env, knob.yaml
                )),
            }
        }
    }
    Ok(())
}

/// Starts a line of `warnings` that is an error (printed as `[DFTRACER ERROR]`): the knob's
/// value could not be used at all and its feature is off.
pub const ERROR_MARK: &str = "ERROR: ";

/// What a warning is about: the knob variable it starts with, else the whole line.
fn warning_key(w: &str) -> &str {
    KNOBS
        .iter()
        .map(|k| k.env)
        .find(|env| {
            w.strip_prefix(env)
                .is_some_and(|rest| rest.starts_with(['=', ':', ' ']))
        })
        .unwrap_or(w)
}

/// Prints `line` on stderr unless a line with the same `key` was printed before in this
/// process (this copy of the core).
pub fn print_once(line: &str, key: &str) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    if printed.iter().any(|k| k == key) {
        return;
    }
    printed.push(key.to_string());
    drop(printed);
    crate::sys::eprint_line(line);
}

impl Config {
    /// Configuration from the process environment (and the YAML it names). Prints warnings and
    /// errors to stderr, one line each; a knob's warning is printed once per process however
    /// often the configuration is read (see [`print_once`]).
    pub fn from_env() -> Config {
        let (cfg, warnings, error) = resolve(|k| std::env::var(k).ok());
        for w in &warnings {
            match w.strip_prefix(ERROR_MARK) {
                Some(e) => print_once(&format!("[DFTRACER ERROR] {e}"), e),
                None => print_once(&format!("[DFTRACER WARN] {w}"), warning_key(w)),
            }
        }
        if let Some(e) = error {
            let line = format!("[DFTRACER ERROR] {e}");
            print_once(&line, &line);
        }
        cfg
    }

    fn normalize(&mut self, warnings: &mut Vec<String>) {
        // The setters already replaced (with a warning) every value outside its knob's
        // domain; these clamps only keep the invariants for a Config built by hand.
        self.ring_size = self
            .ring_size
            .clamp(MIN_RING_SIZE, MAX_RING_SIZE)
            .next_power_of_two();
        self.compression_level = self.compression_level.min(10);
        self.flush_interval_ms = self.flush_interval_ms.max(1);
        if self.trace_interval_ms == 0 {
            self.trace_interval_ms = 1000;
        }
        self.libuv_threads = self.libuv_threads.max(1);
        self.aggregation_selection = Selection::All;
        if self.aggregation_enable && self.aggregation_type == "SELECTIVE" {
            // Without a rules file: every event, as the reference. A bad rules file turns
            // aggregation off (events are written one by one) and says why once; tracing
            // goes on. The end record's cfg says what was done (records.rs).
            if let Some(path) = self.aggregation_file.as_deref() {
                self.aggregation_selection = match crate::rules::Rules::load(path) {
                    Ok(rules) => Selection::Rules(std::sync::Arc::new(rules)),
                    Err(e) => {
                        warnings.push(format!(
                            "{ERROR_MARK}DFTRACER_AGGREGATION_FILE={path}: {e}; aggregation is off"
                        ));
                        Selection::Off
                    }
                };
            }
        }
    }

    /// The value of a knob by the reference's `get_config` key (`ENABLE`, `LOG_FILE`, ...,
    /// with or without the `DFTRACER_` prefix); `""` for an unknown key.
    pub fn get(&self, key: &str) -> String {
        let key = key.trim();
        let full = if key.starts_with("DFTRACER_") {
            key.to_string()
        } else {
            format!("DFTRACER_{key}")
        };
        KNOBS
            .iter()
            .find(|k| k.env.eq_ignore_ascii_case(&full))
            .map(|k| (k.get)(self))
            .unwrap_or_default()
    }

    /// `true` when `level` (ERROR/WARN/INFO/DEBUG) is printed.
    pub fn logs(&self, level: &str) -> bool {
        fn rank(l: &str) -> u8 {
            match l {
                "ERROR" => 0,
                "WARN" | "WARNING" => 1,
                "INFO" => 2,
                "DEBUG" => 3,
                _ => 1,
            }
        }
        rank(level) <= rank(&self.log_level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn rank_comes_from_the_mpi_launcher_before_the_scheduler() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(launcher_rank(env(&[])), None);
        assert_eq!(launcher_rank(env(&[("PMI_RANK", "3")])), Some(3));
        assert_eq!(
            launcher_rank(env(&[("PMIX_RANK", "2"), ("OMPI_COMM_WORLD_RANK", "2")])),
            Some(2)
        );
        // mpirun inside an allocation: the batch step's SLURM_PROCID is 0 on every rank.
        assert_eq!(
            launcher_rank(env(&[("SLURM_PROCID", "0"), ("PMI_RANK", "5")])),
            Some(5)
        );
        assert_eq!(launcher_rank(env(&[("SLURM_PROCID", "7")])), Some(7));
        assert_eq!(launcher_rank(env(&[("FLUX_TASK_RANK", "1")])), Some(1));
        // Garbage or negative values are skipped, not guessed at.
        assert_eq!(
            launcher_rank(env(&[("PMI_RANK", "x"), ("SLURM_PROCID", "4")])),
            Some(4)
        );
        assert_eq!(launcher_rank(env(&[("PMI_RANK", "-1")])), None);
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_match_the_table() {
        let (cfg, w, e) = resolve(env(&[]));
        assert!(w.is_empty() && e.is_none());
        for knob in KNOBS {
            let got = cfg.get(knob.env);
            if knob.default.starts_with('(') {
                assert_eq!(got, "", "{}", knob.env);
            } else {
                assert_eq!(got, knob.default, "{}", knob.env);
            }
        }
    }

    #[test]
    fn booleans_accept_words_and_warn_on_garbage() {
        let (cfg, w, _) = resolve(env(&[
            ("DFTRACER_ENABLE", "yes"),
            ("DFTRACER_INC_METADATA", "off"),
            ("DFTRACER_DISABLE_TIDS", "1"),
            ("DFTRACER_TRACE_COMPRESSION", "maybe"),
        ]));
        assert!(cfg.enable);
        assert!(!cfg.metadata);
        assert!(!cfg.tids, "DISABLE_TIDS=1 disables tids (not inverted)");
        assert!(cfg.compression, "garbage keeps the default");
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("DFTRACER_TRACE_COMPRESSION"), "{w:?}");
    }

    #[test]
    fn every_knob_with_a_domain_warns_on_a_value_outside_it() {
        let free = [
            "DFTRACER_LOG_FILE",
            "DFTRACER_DATA_DIR",
            "DFTRACER_AGGREGATION_FILE",
        ];
        for knob in KNOBS.iter().filter(|k| !free.contains(&k.env)) {
            let (cfg, w, _) = resolve(env(&[(knob.env, "garbage!")]));
            assert_eq!(w.len(), 1, "{}: {w:?}", knob.env);
            assert!(
                w[0].starts_with(&format!("{}=\"garbage!\" is not ", knob.env)),
                "{w:?}"
            );
            let used = w[0].rsplit_once("; using ").unwrap().1;
            assert!(used.starts_with(&cfg.get(knob.env)), "{}: {w:?}", knob.env);
        }
        for (k, v, used) in [
            ("DFTRACER_COMPRESSION_LEVEL", "99", "10"),
            ("DFTRACER_RING_SIZE", "5", "524288"),
            ("DFTRACER_RING_SIZE", "600000", "1048576"),
            ("DFTRACER_FLUSH_INTERVAL_MS", "0", "1"),
            ("DFTRACER_TRACE_INTERVAL_MS", "0", "1000"),
            ("DFTRACER_LIBUV_THREADS", "0", "1"),
            ("DFTRACER_LOG_LEVEL", "LOUD", "WARN"),
            ("DFTRACER_INIT", "garbage", "NONE"),
            ("DFTRACER_AGGREGATION_TYPE", "PARTIAL", "FULL"),
            ("DFTRACER_TIME_METRIC", "HOURS", "US"),
        ] {
            let (cfg, w, _) = resolve(env(&[(k, v)]));
            assert_eq!(w.len(), 1, "{k}={v}: {w:?}");
            assert!(w[0].contains(&format!("using {used}")), "{w:?}");
            assert_eq!(cfg.get(k), used);
        }
        // Values inside the domain: silent.
        for (k, v) in [
            ("DFTRACER_COMPRESSION_LEVEL", "10"),
            ("DFTRACER_RING_SIZE", "524288"),
            ("DFTRACER_LOG_LEVEL", "debug"),
            ("DFTRACER_INIT", "none"),
            ("DFTRACER_WRITE_BUFFER_SIZE", "0"),
        ] {
            let (_, w, _) = resolve(env(&[(k, v)]));
            assert!(w.is_empty(), "{k}={v}: {w:?}");
        }
    }

    #[test]
    fn integers_are_strict() {
        let (cfg, w, _) = resolve(env(&[("DFTRACER_WRITE_BUFFER_SIZE", "abc")]));
        assert_eq!(cfg.write_buffer_size, 1024 * 1024);
        assert_eq!(w.len(), 1);
        let (cfg, _, _) = resolve(env(&[("DFTRACER_WRITE_BUFFER_SIZE", "4096")]));
        assert_eq!(cfg.write_buffer_size, 4096);
    }

    #[test]
    fn yaml_then_env_overrides() {
        let dir = std::env::temp_dir().join(format!("dft-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.yaml");
        std::fs::write(
            &path,
            "enable: true\ntracer:\n  log_file: /x/y\n  time_metric: MS\n  compression: false\n  data_dirs: [/a, /b]\nfeatures:\n  metadata: true\n  tid: false\ninternal:\n  write_buffer_size: 1000\n",
        )
        .unwrap();
        let p = path.to_str().unwrap().to_string();
        let (cfg, w, e) = resolve(env(&[
            ("DFTRACER_CONFIGURATION", &p),
            ("DFTRACER_TIME_METRIC", "NS"),
        ]));
        assert!(e.is_none() && w.is_empty(), "{w:?} {e:?}");
        assert!(cfg.enable);
        assert_eq!(cfg.log_file.as_deref(), Some("/x/y"));
        assert_eq!(cfg.time_metric, TimeMetric::Ns);
        assert!(!cfg.compression);
        assert!(!cfg.tids);
        assert_eq!(cfg.data_dirs.as_deref(), Some("/a:/b"));
        assert_eq!(cfg.write_buffer_size, 1000);
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn missing_or_bad_yaml_disables_tracing() {
        let (cfg, _, e) = resolve(env(&[
            ("DFTRACER_CONFIGURATION", "/nonexistent/x.yaml"),
            ("DFTRACER_ENABLE", "1"),
        ]));
        assert!(!cfg.enable);
        assert!(e.unwrap().to_string().contains("/nonexistent/x.yaml"));
        let dir = std::env::temp_dir().join(format!("dft-cfg-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.yaml");
        std::fs::write(&path, "enable: [unclosed\n").unwrap();
        let p = path.to_str().unwrap().to_string();
        let (cfg, _, e) = resolve(env(&[("DFTRACER_CONFIGURATION", &p)]));
        assert!(!cfg.enable);
        assert!(matches!(e, Some(ConfigError::YamlParse { .. })));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn get_config_keys() {
        let (cfg, _, _) = resolve(env(&[("DFTRACER_LOG_FILE", "/t/p")]));
        assert_eq!(cfg.get("LOG_FILE"), "/t/p");
        assert_eq!(cfg.get("DFTRACER_LOG_FILE"), "/t/p");
        assert_eq!(cfg.get("NOPE"), "");
    }

    #[test]
    fn selective_rules_are_loaded_once_and_a_bad_file_turns_aggregation_off() {
        let dir = std::env::temp_dir().join(format!("dft-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.yaml");
        std::fs::write(&good, "inclusion:\n  - \"dur < 10\"\n").unwrap();
        let env = |file: &str| {
            let file = file.to_string();
            move |k: &str| match k {
                "DFTRACER_ENABLE_AGGREGATION" => Some("1".to_string()),
                "DFTRACER_AGGREGATION_TYPE" => Some("SELECTIVE".to_string()),
                "DFTRACER_AGGREGATION_FILE" => Some(file.clone()),
                _ => None,
            }
        };
        let (cfg, warnings, err) = resolve(env(good.to_str().unwrap()));
        assert!(err.is_none() && warnings.is_empty(), "{warnings:?}");
        assert!(matches!(cfg.aggregation_selection, Selection::Rules(_)));
        for bad in ["/dev/zero", "/nonexistent.yaml"] {
            let (cfg, warnings, err) = resolve(env(bad));
            assert!(err.is_none());
            assert_eq!(cfg.aggregation_selection, Selection::Off);
            // The knobs keep the values given (the cfg record says what was asked).
            assert!(cfg.aggregation_enable);
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(warnings[0].starts_with(ERROR_MARK), "{warnings:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn selective_without_a_rules_file_aggregates_every_event() {
        // The reference 2.2.0 aggregated every event for SELECTIVE without a file.
        let (cfg, warnings, err) = resolve(|k: &str| match k {
            "DFTRACER_ENABLE_AGGREGATION" => Some("1".to_string()),
            "DFTRACER_AGGREGATION_TYPE" => Some("SELECTIVE".to_string()),
            _ => None,
        });
        assert!(err.is_none() && warnings.is_empty(), "{warnings:?}");
        assert_eq!(cfg.aggregation_selection, Selection::All);
    }
}
