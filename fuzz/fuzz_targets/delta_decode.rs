//! Deltas on arbitrary bytes (what a damaged or hostile manifest or pack holds): decoding a
//! delta blob against any base never panics, never allocates what its header merely claims, and
//! whatever decodes hashes to the id its header names; following a chain ends after a bounded
//! number of reads, whatever depths and bases the blobs claim.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::object::{blob, delta, ObjectId};

fuzz_target!(|data: &[u8]| {
    // The first byte cuts the rest into a base and a blob.
    let Some((&cut, rest)) = data.split_first() else { return };
    let (base, bytes) = rest.split_at((usize::from(cut) * 61).min(rest.len()));
    if let Ok((header, named)) = delta::base_of(bytes) {
        // Against the base it names, so the frame is decompressed with `base` as its prefix.
        if let Ok(raw) = delta::decode(&header.id, bytes, &named, base) {
            assert_eq!(ObjectId::of(&raw), header.id, "a decoded delta hashes to its id");
            assert!(raw.len() as u64 <= blob::MAX_DELTA_RAW);
        }
    }
    // A chain in which every link is this blob (a cycle, for a delta naming itself), or the
    // base's bytes once the blob is asked for its base.
    if let Ok(h) = blob::parse_header(bytes) {
        let mut reads = 0usize;
        let result = delta::resolve(&h.id, |id| {
            reads += 1;
            if *id == h.id { Ok(delta::Link::Blob(bytes.to_vec())) } else { Ok(delta::Link::Raw(base.to_vec())) }
        });
        assert!(reads <= usize::from(blob::MAX_DEPTH) + 1, "{reads} reads");
        if let Ok(raw) = result {
            assert_eq!(ObjectId::of(&raw), h.id);
        }
    }
});
