//! Counts in request parameters (lines, bytes, results, seconds): any JSON integer from 0 to
//! 2^64 - 1, written as an integer or as a number with an integral value (`303.0` is 303), as
//! JSON Schema's `integer` says; `2.5`, `-1` or `1e300` are refused by name.

use serde::{Deserialize, Deserializer};

/// 2^64: every integral double below it is a `u64`, exactly.
const END: f64 = 18_446_744_073_709_551_616.0;

/// The schema of a count.
#[derive(schemars::JsonSchema)]
#[schemars(inline, transform = range)]
pub struct Count(#[allow(dead_code)] u64);

fn range(schema: &mut schemars::Schema) {
    schema.insert("minimum".into(), 0.into());
    schema.insert("maximum".into(), u64::MAX.into());
}

/// The schema of a 1-based line number: a count of at least 1 (0 is refused, naming the rule).
#[derive(schemars::JsonSchema)]
#[schemars(inline, transform = line_range)]
pub struct LineNumber(#[allow(dead_code)] u64);

fn line_range(schema: &mut schemars::Schema) {
    schema.insert("minimum".into(), 1.into());
    schema.insert("maximum".into(), u64::MAX.into());
}

fn of<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else { return Ok(None) };
    match (n.as_u64(), n.as_f64()) {
        (Some(v), _) => Ok(Some(v)),
        (None, Some(f)) if f.fract() == 0.0 && (0.0..END).contains(&f) => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!("{n} is not a count: give a whole number of at least 0"))),
    }
}

/// An optional count (one past `usize::MAX` cannot be asked for on a 64-bit machine).
pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    of(d).map(|v| v.map(|v| usize::try_from(v).unwrap_or(usize::MAX)))
}

/// An optional count of at least one: 0 is refused when parsed, as its schema's minimum says.
pub fn de_positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match de(d)? {
        Some(0) => Err(serde::de::Error::custom("0 is below the minimum of 1")),
        v => Ok(v),
    }
}

/// An optional count, as a `u64`. Its schema: [`Count`], or a range of its own.
pub fn de_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    of(d)
}
