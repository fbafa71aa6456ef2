//! Events as frontends give them: [`Layer`], [`Arg`] and [`Value`], and the fixed shapes of
//! frequent events ([`Schema`], [`Slot`]). Their binary form inside a thread's ring is
//! [`crate::record`]. Everything is bounded: strings are clipped to [`MAX_STR`] bytes (the
//! encoder then writes a visible truncation marker), keys to [`MAX_KEY`], and at most
//! [`MAX_ARGS`] args are kept (the rest are counted and reported as `dft_args_dropped`). The
//! largest record is therefore [`crate::record::MAX_RECORD`] bytes.

/// Instrumentation layer, the integer `type` of every record (reference §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    Unknown = 0,
    Dftracer = 1,
    CApp = 2,
    LibcIo = 3,
    Hip = 4,
    Hdf5 = 5,
    Python = 6,
    Psutil = 7,
    Finstrument = 8,
    CppApp = 9,
    Mpi = 10,
    Papi = 11,
    Omnistat = 12,
    Variorum = 13,
    Cuda = 14,
}

impl Layer {
    pub const ALL: [Layer; 15] = [
        Layer::Unknown,
        Layer::Dftracer,
        Layer::CApp,
        Layer::LibcIo,
        Layer::Hip,
        Layer::Hdf5,
        Layer::Python,
        Layer::Psutil,
        Layer::Finstrument,
        Layer::CppApp,
        Layer::Mpi,
        Layer::Papi,
        Layer::Omnistat,
        Layer::Variorum,
        Layer::Cuda,
    ];
    pub fn from_u8(v: u8) -> Layer {
        Layer::ALL
            .get(v as usize)
            .copied()
            .unwrap_or(Layer::Unknown)
    }
    /// Name used as a key of `end.args.used`.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Unknown => "UNKNOWN",
            Layer::Dftracer => "DFTRACER",
            Layer::CApp => "C_APP",
            Layer::LibcIo => "LIBC_IO",
            Layer::Hip => "HIP",
            Layer::Hdf5 => "HDF5",
            Layer::Python => "PYTHON",
            Layer::Psutil => "PSUTIL",
            Layer::Finstrument => "FINSTRUMENT",
            Layer::CppApp => "CPP_APP",
            Layer::Mpi => "MPI",
            Layer::Papi => "PAPI",
            Layer::Omnistat => "OMNISTAT",
            Layer::Variorum => "VARIORUM",
            Layer::Cuda => "CUDA",
        }
    }
}

/// An argument value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    /// Any bytes; invalid UTF-8 is replaced when encoded.
    Str(&'a [u8]),
    /// A file path: written as `"<key>":"<hash>"` with an `FH` record emitted once per file.
    Path(&'a [u8]),
}

/// A named argument. Keys are bytes so that frontends never need to validate them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg<'a> {
    pub key: &'a [u8],
    pub value: Value<'a>,
}

impl<'a> Arg<'a> {
    pub fn new(key: &'a str, value: Value<'a>) -> Self {
        Arg {
            key: key.as_bytes(),
            value,
        }
    }
    pub fn int(key: &'a str, v: i64) -> Self {
        Arg::new(key, Value::Int(v))
    }
    pub fn str(key: &'a str, v: &'a str) -> Self {
        Arg::new(key, Value::Str(v.as_bytes()))
    }
}

pub use crate::files::{FileHandle, FileRef, Pinned};

/// How a [`Schema`] value slot is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The slot's `u64` bits as a signed integer.
    Int,
    /// As an unsigned integer.
    UInt,
    /// The bits of an `f64`, written as [`Value::Float`] is (`null` when not finite).
    Float,
    /// 0 or 1, written `false` or `true`.
    Bool,
    /// A string stored after the record's values ([`crate::record`]): the slot holds its
    /// length in bytes, at most [`MAX_STR`] (a longer one is recorded without a schema, where
    /// it is clipped and marked). Written as [`Value::Str`] is.
    Str,
}

impl Slot {
    /// Whether the slot is an integer (what a line written without checks holds: see
    /// `format::event::complete_static`).
    pub const fn is_int(self) -> bool {
        matches!(self, Slot::Int | Slot::UInt)
    }
}

/// The fixed shape of a frequent event: name, category and arg keys known at compile time.
/// A [`Pending::Static`](crate::record::Pending::Static) record of it carries only a pointer to the schema, the values and
/// an optional [`FileHandle`] (a slot address and its generation, see [`crate::files`]): a
/// few stores on the hot path, and the writer copies the names
/// without escaping them (checked plain by [`Schema::new`], at compile time for a `static`).
///
/// The JSON args are the slots in order, then `file_key` with the file's hash when a file
/// is given.
///
/// Its slots are integers: the writer renders a static record's values without checks.
/// A schema with float, bool or string slots is a [`MixedSchema`], which only
/// [`crate::intern_args`] makes; the fields are private so that no other code builds one.
#[derive(Debug)]
pub struct Schema {
    pub(crate) layer: Layer,
    pub(crate) name: &'static str,
    pub(crate) cat: &'static str,
    pub(crate) keys: &'static [(&'static str, Slot)],
    pub(crate) file_key: &'static str,
    /// A low-information call ([`Schema::folded`]): the slot of its `ret`. Such a call that
    /// returned 0 is counted in its (name, thread, interval) ph 3 record instead of written
    /// as an event, unless `DFTRACER_FOLD_CALLS=0` (FORMAT.md "Folded calls").
    pub(crate) fold: Option<u8>,
    /// A slot is a float, bool or string (only in a [`MixedSchema`]; see [`Schema::is_mixed`]).
    pub(crate) mixed: bool,
}

/// A schema with float, bool or string slots, from [`crate::intern_args`]: its events are
/// recorded through [`crate::complete_strs`] only (a mixed record, rendered through the
/// writer's checked cursor), never as static records.
#[derive(Clone, Copy, Debug)]
pub struct MixedSchema(&'static Schema);

impl MixedSchema {
    pub(crate) fn schema(self) -> &'static Schema {
        self.0
    }
}

/// What [`crate::intern_args`] gives: the way its events must be recorded is in the type.
#[derive(Clone, Copy, Debug)]
pub enum ArgsSchema {
    /// Integer slots only: through [`crate::complete_static`].
    Ints(&'static Schema),
    /// Float, bool or string slots: through [`crate::complete_strs`].
    Mixed(MixedSchema),
}

impl ArgsSchema {
    pub(crate) fn of(schema: &'static Schema) -> ArgsSchema {
        if schema.is_mixed() {
            ArgsSchema::Mixed(MixedSchema(schema))
        } else {
            ArgsSchema::Ints(schema)
        }
    }

    #[cfg(test)]
    pub(crate) fn schema(self) -> &'static Schema {
        match self {
            ArgsSchema::Ints(s) => s,
            ArgsSchema::Mixed(m) => m.0,
        }
    }
}

impl Schema {
    /// Panics (at compile time in a `static`) if a string needs JSON escaping, a key is
    /// `hhash`, a slot is not an integer, or there are more than [`MAX_ARGS`] slots.
    pub const fn new(
        layer: Layer,
        name: &'static str,
        cat: &'static str,
        keys: &'static [(&'static str, Slot)],
        file_key: &'static str,
    ) -> Schema {
        assert!(plain(name) && plain(cat) && plain(file_key));
        assert!(keys.len() < MAX_ARGS);
        let mut i = 0;
        while i < keys.len() {
            assert!(plain(keys[i].0));
            assert!(!eq(keys[i].0, "hhash"));
            assert!(
                keys[i].1.is_int(),
                "float, bool and string slots come from intern_args"
            );
            i += 1;
        }
        assert!(!eq(file_key, "hhash"));
        Schema {
            layer,
            name,
            cat,
            keys,
            file_key,
            fold: None,
            mixed: false,
        }
    }

    /// This schema as a low-information call's (`isatty`, `fstat` of a traced fd): folded
    /// into counts when its `ret` slot is 0. Panics (at compile time in a `static`) without
    /// an int `ret` slot.
    pub const fn folded(self) -> Schema {
        let mut i = 0;
        while i < self.keys.len() {
            if eq(self.keys[i].0, "ret") && matches!(self.keys[i].1, Slot::Int) {
                return Schema {
                    fold: Some(i as u8),
                    ..self
                };
            }
            i += 1;
        }
        panic!("a folded schema needs an int `ret` slot")
    }

    pub fn layer(&self) -> Layer {
        self.layer
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn cat(&self) -> &'static str {
        self.cat
    }

    /// Whether a slot is a float, bool or string (only in a [`MixedSchema`]).
    pub(crate) fn is_mixed(&self) -> bool {
        self.mixed
    }
}

/// Printable ASCII without `"` or `\`: written into JSON as is.
const fn plain(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x20 || b[i] >= 0x7f || b[i] == b'"' || b[i] == b'\\' {
            return false;
        }
        i += 1;
    }
    true
}

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Longest string kept (bytes); longer ones are clipped at a character boundary and marked.
pub const MAX_STR: usize = 4096;
/// Longest argument key kept.
pub const MAX_KEY: usize = 256;
/// Most args kept per event.
pub const MAX_ARGS: usize = 32;

/// Clips `s` to at most `max` bytes, backing off to a UTF-8 character boundary when the cut
/// would split one (invalid input is cut where it is).
pub fn clip(s: &[u8], max: usize) -> &[u8] {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    let mut back = 0;
    while end > 0 && back < 3 && (s[end] & 0xC0) == 0x80 {
        end -= 1;
        back += 1;
    }
    if back == 3 && (s[end] & 0xC0) == 0x80 {
        end = max;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_respects_char_boundaries() {
        let s = "é".repeat(10); // 2 bytes each
        assert_eq!(clip(s.as_bytes(), 5).len(), 4);
        assert_eq!(clip(b"abc", 5), b"abc");
    }

    /// A static schema's slots are integers (its records are rendered without checks).
    #[test]
    #[should_panic(expected = "intern_args")]
    fn a_static_schema_refuses_other_slots() {
        static KEYS: [(&str, super::Slot); 1] = [("x", super::Slot::Float)];
        let _ = super::Schema::new(super::Layer::Python, "f", "c", &KEYS, "");
    }
}
