//! The Merkle proofs of the audit log against the public test vectors of RFC 6962 / RFC 9162
//! (`tests/vectors/merkle/`, from transparency-dev/merkle, see its README and LICENSE there):
//! every file, each wrong answer reported with the file and its `desc`.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;
use trove::tlog::merkle::{verify_consistency, verify_inclusion};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn b64(v: &Value) -> Vec<u8> {
    match v.as_str() {
        Some(s) => base64::engine::general_purpose::STANDARD.decode(s).expect("base64"),
        None => Vec::new(),
    }
}

fn hashes(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().map(|a| a.iter().map(b64).collect()).unwrap_or_default()
}

fn vectors(kind: &str) -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/merkle").join(kind);
    let all: Vec<_> = files(&dir)
        .into_iter()
        .map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
            (p, v)
        })
        .collect();
    assert!(all.len() > 50, "the {kind} vectors are missing from {}", dir.display());
    all
}

#[test]
fn every_inclusion_vector_is_judged_right() {
    let mut wrong = Vec::new();
    for (path, v) in vectors("inclusion") {
        let index = v["leafIdx"].as_u64().expect("leafIdx");
        let size = v["treeSize"].as_u64().expect("treeSize");
        let got = verify_inclusion(index, size, &b64(&v["leafHash"]), &hashes(&v["proof"]), &b64(&v["root"]));
        let want_err = v["wantErr"].as_bool().expect("wantErr");
        if got.is_err() != want_err {
            wrong.push(format!("{}: {} (got {got:?})", path.display(), v["desc"]));
        }
    }
    assert!(wrong.is_empty(), "wrong answers:\n{}", wrong.join("\n"));
}

#[test]
fn every_consistency_vector_is_judged_right() {
    let mut wrong = Vec::new();
    for (path, v) in vectors("consistency") {
        let size1 = v["size1"].as_u64().expect("size1");
        let size2 = v["size2"].as_u64().expect("size2");
        let got = verify_consistency(size1, size2, &hashes(&v["proof"]), &b64(&v["root1"]), &b64(&v["root2"]));
        let want_err = v["wantErr"].as_bool().expect("wantErr");
        if got.is_err() != want_err {
            wrong.push(format!("{}: {} (got {got:?})", path.display(), v["desc"]));
        }
    }
    assert!(wrong.is_empty(), "wrong answers:\n{}", wrong.join("\n"));
}

mod property {
    use proptest::prelude::*;
    use trove::tlog::merkle::{
        consistency_proof, inclusion_proof, leaf_hash, root, verify_consistency, verify_inclusion, Frontier,
        MemoryNodes,
    };

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A random log: every proof between random sizes verifies against the roots the
        /// frontier gave as it grew, and one flipped bit anywhere makes it fail.
        #[test]
        fn proofs_between_random_sizes_verify_and_tampering_fails(
            entries in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..600),
            picks in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 1..20),
            flip in any::<(usize, u8)>(),
        ) {
            let (mut nodes, mut f, mut leaves, mut roots) = (MemoryNodes::default(), Frontier::new(), Vec::new(), Vec::new());
            for e in &entries {
                let leaf = leaf_hash(e);
                nodes.record(&f.push(leaf));
                leaves.push(leaf);
                roots.push(f.root());
            }
            let n = entries.len() as u64;
            for (a, b, c) in picks {
                let size2 = 1 + b % n;
                let size1 = 1 + a % size2;
                let index = c % size2;
                prop_assert_eq!(root(&nodes, size2).expect("root"), roots[size2 as usize - 1]);
                let to_vec = |p: Vec<[u8; 32]>| p.into_iter().map(|h| h.to_vec()).collect::<Vec<_>>();
                let incl = to_vec(inclusion_proof(&nodes, index, size2).expect("inclusion"));
                let root2 = roots[size2 as usize - 1];
                prop_assert!(verify_inclusion(index, size2, &leaves[index as usize], &incl, &root2).is_ok());
                let cons = to_vec(consistency_proof(&nodes, size1, size2).expect("consistency"));
                let root1 = roots[size1 as usize - 1];
                prop_assert!(verify_consistency(size1, size2, &cons, &root1, &root2).is_ok());
                // One bit flipped in a proof hash, or a wrong root, is refused.
                if !incl.is_empty() {
                    let mut bad = incl.clone();
                    let at = flip.0 % bad.len();
                    bad[at][flip.1 as usize % 32] ^= 1;
                    prop_assert!(verify_inclusion(index, size2, &leaves[index as usize], &bad, &root2).is_err());
                }
                if !cons.is_empty() {
                    let mut bad = cons.clone();
                    let at = flip.0 % bad.len();
                    bad[at][flip.1 as usize % 32] ^= 1;
                    prop_assert!(verify_consistency(size1, size2, &bad, &root1, &root2).is_err());
                }
                let mut wrong = root2;
                wrong[0] ^= 0x80;
                prop_assert!(verify_inclusion(index, size2, &leaves[index as usize], &incl, &wrong).is_err());
            }
        }
    }
}
