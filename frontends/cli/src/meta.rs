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
    /// `start.args.exec_hash` and `cmd_hash`.
    pub exec_hash: Option<Vec<u8>>,
    pub cmd_hash: Option<Vec<u8>>,
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
                if let Some(Val::Str(h)) = l.args.and_then(|a| scan::get(a, b"cmd_hash")) {
                    self.cmd_hash = Some(h.to_vec());
                }
                false
            }
            _ => false,
        }
    }

    /// The program's name (raw), when the trace says: the exec name record, unless it is
    /// missing or the reference's placeholder `DEFAULT` (its Python module writes that);
    /// then from the command line, the script after an interpreter (`python;train.py`).
    pub fn exec(&self) -> Option<Vec<u8>> {
        let get = |h: &Option<Vec<u8>>| h.as_ref().and_then(|h| self.strings.get(h));
        if let Some(e) = get(&self.exec_hash).filter(|e| e.as_slice() != b"DEFAULT") {
            return Some(e.clone());
        }
        let cmd = get(&self.cmd_hash)?;
        let base = |s: &[u8]| -> Vec<u8> {
            let s = s.trim_ascii();
            s.rsplit(|&b| b == b'/').next().unwrap_or(s).to_vec()
        };
        let mut parts = cmd
            .split(|&b| b == b';')
            .filter(|p| !p.trim_ascii().is_empty());
        let first = base(parts.next()?);
        let interpreter = [&b"python"[..], b"perl", b"ruby", b"node", b"bash", b"sh"]
            .iter()
            .any(|i| first.starts_with(i));
        match parts.find(|p| !p.starts_with(b"-")) {
            Some(script) if interpreter => Some(base(script)),
            _ => Some(first),
        }
    }

    /// The path (raw) an event's `fhash` names.
    pub fn path_of(&self, args: &[u8]) -> Option<&[u8]> {
        match scan::get(args, b"fhash") {
            Some(Val::Str(h)) => self.paths.get(h).map(|v| v.as_slice()),
            _ => None,
        }
    }
}
