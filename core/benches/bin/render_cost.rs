//! Driver for measuring the writer's per-line cost under callgrind: records N static events
//! of an interned schema (no args, like a decorated Python call; or `pread`-like: 4 int args
//! and a file) from one thread, then finalizes.
//!
//! `DFTRACER_ENABLE=1 DFTRACER_LOG_FILE=/tmp/x/t valgrind --tool=callgrind
//! target/release/examples/render_cost <N> [pread]`: run with two N and divide the difference
//! of the instruction totals by the difference of N.

use dftracer_core::{Config, FileRef, Layer, Origin, Schema, Slot};

static PREAD: Schema = Schema::new(
    Layer::LibcIo,
    "pread64",
    "POSIX",
    &[
        ("fd", Slot::Int),
        ("count", Slot::UInt),
        ("offset", Slot::Int),
        ("ret", Slot::Int),
    ],
    "fhash",
);

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let pread = args.next().is_some_and(|a| a == "pread");
    dftracer_core::frontend::export_env_at_init(false);
    dftracer_core::init(Config::from_env(), Origin::App, None).expect("init");
    let schema = dftracer_core::intern(Layer::Python, b"deco", b"bench").expect("interned");
    let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/data/train/x.bin")));
    let t = dftracer_core::now();
    for i in 0..n {
        if pread {
            dftracer_core::complete_static(
                &PREAD,
                t + 3 * i,
                2,
                &[5, 4096, i * 4096, 4096],
                Some(file.handle()),
            );
        } else {
            dftracer_core::complete_static(schema, t + 3 * i, 2, &[], None);
        }
    }
    dftracer_core::finalize();
}
