//! The base layer: errors, paths, time, random ids, patterns and their trigrams, the memory
//! budget, progress, processes and their descriptor table, failpoints, syncing behind a writer,
//! and varints. It imports nothing else of the crate.

pub mod budget;
pub mod count;
pub mod descriptors;
pub mod error;
pub mod failpoint;
pub mod flush;
pub mod grams;
pub mod id;
pub mod path;
pub mod pattern;
pub mod process;
pub mod progress;
pub mod random;
pub mod time;
pub mod varint;
