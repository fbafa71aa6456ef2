//! What a trace file says about itself in its metadata records: the host (HH), the time unit
//! (CM `time_metric`), file paths by hash (FH), strings by hash (SH) and, from `start`, which
//! string is the executable's name.

use crate::scan::{self, Line, Ph, Val};
use std::collections::HashMap;

#[derive(Default)]
pub struct Meta {
    /// Hostname (raw JSON string contents); empty until the HH record.
    pub host: Vec<u8>,
    /// Nanoseconds per trace time unit (default µs).
    pub unit_ns: u64,
    /// `fhash` → path (raw).
    pub paths: HashMap<Vec<u8>, Vec<u8>>,
    /// SH hash → string (raw).
    pub strings: HashMap<Vec<u8>, Vec<u8>>,
    /// `start.args.exec_hash`.
    pub exec_hash: Option<Vec<u8>>,
}

impl Meta {
    pub fn new() -> Meta {
        Meta {
            unit_ns: 1000,
            ..Meta::default()
        }
    }

    /// Takes in what `l` tells; `true` when it was a metadata record.
    pub fn observe(&mut self, l: &Line<'_>) -> bool {
        match l.ph {
            Some(Ph::Metadata) => {
                let Some(args) = l.args else { return true };
                let (mut name, mut value) = (None, None);
                scan::members(args, |k, v| match k {
                    b"name" => name = v.str(),
                    b"value" => value = v.str(),
                    _ => {}
                });
                match (l.name, name, value) {
                    (b"HH", Some(n), _) => self.host = n.to_vec(),
                    (b"CM", Some(b"time_metric"), Some(u)) => {
                        self.unit_ns = match u {
                            b"NS" => 1,
                            b"MS" => 1_000_000,
                            b"SEC" => 1_000_000_000,
                            _ => 1000,
                        }
                    }
                    (b"FH", Some(path), Some(h)) => {
                        self.paths.insert(h.to_vec(), path.to_vec());
                    }
                    (b"SH", Some(s), Some(h)) => {
                        self.strings.insert(h.to_vec(), s.to_vec());
                    }
                    _ => {}
                }
                true
            }
            Some(Ph::Complete) if l.name == b"start" && l.cat == b"dftracer" => {
                if let Some(Val::Str(h)) = l.args.and_then(|a| scan::get(a, b"exec_hash")) {
                    self.exec_hash = Some(h.to_vec());
                }
                false
            }
            _ => false,
        }
    }

    /// The executable's name (raw), when the trace says.
    pub fn exec(&self) -> Option<&[u8]> {
        self.exec_hash
            .as_ref()
            .and_then(|h| self.strings.get(h))
            .map(|v| v.as_slice())
    }

    /// The path (raw) an event's `fhash` names.
    pub fn path_of(&self, args: &[u8]) -> Option<&[u8]> {
        match scan::get(args, b"fhash") {
            Some(Val::Str(h)) => self.paths.get(h).map(|v| v.as_slice()),
            _ => None,
        }
    }
}
