//! The directory cache's record and the search index's posting lists on arbitrary bytes (what a
//! damaged manifest row holds): parsing never panics, and what parses re-encodes to bytes that
//! parse the same (a version 1 record's file contents aside, which later versions leave out).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::testing::{dir_cache, grams};

fuzz_target!(|data: &[u8]| {
    if let Some(record) = dir_cache::Record::parse(data) {
        let entries: Vec<_> = record.entries().map_while(|e| e.ok()).collect();
        let mut w = dir_cache::RecordWriter::new(&record.tree);
        for e in &entries {
            w.push(e);
        }
        let again = w.finish();
        let back = dir_cache::Record::parse(&again).expect("a written record parses");
        let back: Vec<_> = back.entries().collect::<Result<_, _>>().expect("its entries parse");
        // Written, an older record becomes the current version: a file's content is left to the tree.
        let mut expected = entries.clone();
        for e in expected.iter_mut().filter(|e| e.kind == trove::testing::tree::EntryKind::File) {
            (e.content, e.sha256) = (None, None);
        }
        assert_eq!(back, expected, "parse . write is the identity on what parsed, less file contents");
    }
    let mut docs = Vec::new();
    if grams::decode_postings(data, &mut docs).is_some() {
        assert!(docs.windows(2).all(|w| w[0] < w[1]), "a decoded list ascends");
        let mut again = Vec::new();
        grams::encode_postings(&docs, &mut again);
        let mut back = Vec::new();
        assert_eq!(grams::decode_postings(&again, &mut back), Some(()));
        assert_eq!(back, docs);
    }
});
