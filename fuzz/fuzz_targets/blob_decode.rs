//! The blob codec on arbitrary bytes (what a damaged or hostile pack holds): parsing a header,
//! decoding a blob of either kind (whole or its start) and a bundle's member table never panic,
//! never allocate what the bytes merely claim, and whatever decodes hashes to the id its header
//! names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::object::{blob, ObjectId};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = blob::parse_header(data) {
        let _ = (h.codec, h.kind, h.raw_len, h.payload_len);
    }
    if let Ok((header, raw)) = blob::decode_any(data) {
        assert_eq!(ObjectId::of(&raw), header.id, "a decoded blob hashes to its id");
        assert_eq!(raw.len() as u64, header.raw_len);
        if header.kind == blob::Kind::Bundle {
            if let Ok(members) = blob::bundle_members(&raw) {
                for (offset, len) in members {
                    assert!(offset + len <= raw.len() as u64, "members lie inside the bundle");
                }
            }
        }
    }
    // The start of a blob: never more than asked or than the header says, and the start of
    // what a whole decode gives.
    if let Some((&want, rest)) = data.split_first() {
        let want = u64::from(want) * 97;
        if let Ok((header, start)) = blob::decode_prefix(rest, want) {
            assert!(start.len() as u64 <= want.max(header.raw_len));
            assert!(start.len() as u64 <= header.raw_len);
            if let Ok((_, whole)) = blob::decode_unverified(rest) {
                assert!(whole.starts_with(&start), "a prefix is the start of the whole");
            }
        }
    }
    if data.len() >= 32 {
        let id = ObjectId::from_slice(&data[..32]).expect("32 bytes");
        if let Ok(raw) = blob::decode(&id, &data[32..]) {
            assert_eq!(ObjectId::of(&raw), id);
        }
    }
    if let Ok(members) = blob::bundle_members(data) {
        let end = members.last().map_or(0, |(o, l)| o + l);
        assert!(end <= data.len() as u64);
    }
});
