//! The content-addressed object store: ids, the blob codec and its deltas, packs, chunking and
//! backends.

pub mod backend;
pub mod blob;
pub mod bundle;
pub mod chunker;
pub mod delta;
pub mod id;
pub mod keyfile;
pub mod local;
pub mod location;
pub mod memory;
pub mod pack;
pub mod pack_cache;
pub mod s3;
pub mod seal;

pub use backend::{probe, Backend, Capabilities};
pub use chunker::Chunking;
pub use id::{ObjectId, RandomKeyMap, RandomKeySet, Sha256};
pub use keyfile::{KeyFile, Stretch};
pub use local::LocalBackend;
pub use location::Location;
pub use memory::MemoryBackend;
pub use pack::{PackWriter, SealedPack};
pub use pack_cache::PackCache;
pub use s3::{S3Backend, S3Settings};
pub use seal::{SealKey, SealedBackend};
