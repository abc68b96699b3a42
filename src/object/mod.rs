//! The content-addressed object store: ids, the blob codec and its deltas, packs, chunking and
//! backends.

pub mod backend;
pub mod blob;
pub mod bundle;
pub mod chunker;
pub mod delta;
pub mod id;
pub mod local;
pub mod memory;
pub mod pack;

pub use backend::Backend;
pub use chunker::Chunking;
pub use id::{ObjectId, RandomKeyMap, RandomKeySet, Sha256};
pub use local::LocalBackend;
pub use memory::MemoryBackend;
pub use pack::{PackWriter, SealedPack};
