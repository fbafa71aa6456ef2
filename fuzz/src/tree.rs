//! A JSON tree that keeps what `serde_json::Value` hides: key order *and* duplicate keys,
//! and whether a number was written as an unsigned, a negative or a float.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Null,
    Bool(bool),
    /// A non-negative integer literal.
    U(u64),
    /// A negative integer literal.
    I(i64),
    /// A literal with a fraction or exponent.
    F(f64),
    S(String),
    A(Vec<J>),
    /// Entries in file order, duplicates kept.
    O(Vec<(String, J)>),
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = J;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<J, E> {
        Ok(J::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<J, E> {
        Ok(J::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<J, E> {
        Ok(J::U(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<J, E> {
        Ok(J::I(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<J, E> {
        Ok(J::F(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<J, E> {
        Ok(J::S(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<J, E> {
        Ok(J::S(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<J, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(J::A(v))
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<J, M::Error> {
        let mut v = Vec::new();
        while let Some(entry) = map.next_entry::<String, J>()? {
            v.push(entry);
        }
        Ok(J::O(v))
    }
}
