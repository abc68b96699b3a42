//! The tree encoding on arbitrary bytes (what a damaged manifest row holds): decoding and
//! counting never panic and agree, and what decodes encodes to bytes that decode the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::testing::tree;

fuzz_target!(|data: &[u8]| {
    // `count` only walks the lengths, so it may accept what `decode` refuses (an unknown kind),
    // never the other way round.
    let count = tree::count(data);
    if let Some(entries) = tree::decode(data) {
        assert_eq!(count, Some(entries.len()), "count agrees with decode");
        let again = tree::encode(&entries);
        assert_eq!(tree::decode(&again).as_ref(), Some(&entries), "decode . encode is the identity");
        let _ = tree::id_of_encoding(&again);
    }
});
