//! An audit bundle from anywhere (`trove audit verify --bundle`) on arbitrary bytes: reading and
//! verifying it never panics and never allocates what a line merely claims; whatever it reports
//! adds up (every record read is either under a signed checkpoint or named as unsigned), and a
//! bundle found sound and covered is covered to its last record. The key is the one the seed
//! bundles in `corpus/audit_bundle/` were signed with, so mutations of them reach the checks
//! past the signatures.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::tlog::note::VerifierKey;

/// The public key of the log the seed bundles were exported from.
const KEY: &str = "trove/62fc7856a5077cef1907128361b7c670+d6eebf11+AWeWjtliwLAHVXu6QR3Nlx2rCPu+R5Dw3xaKbp0rDPrC";

fuzz_target!(|data: &[u8]| {
    let key = VerifierKey::parse(KEY).expect("the fixed key parses");
    if let Ok(report) = trove::verify_bundle(data, std::slice::from_ref(&key)) {
        let last = (report.from - 1).checked_add(report.records).expect("the records counted fit a seq");
        assert_eq!(report.verified_to + report.unsigned_tail, last, "{report:?}");
        assert!(report.verified_to >= report.from - 1, "{report:?}");
        match report.unsigned {
            Some(u) => assert_eq!((u.first, u.last), (report.verified_to + 1, last), "{report:?}"),
            None => assert_eq!(report.unsigned_tail, 0, "{report:?}"),
        }
        if report.ok() && report.covered() && report.records > 0 {
            assert_eq!(report.last_checkpoint.as_ref().map(|c| c.size), Some(last), "{report:?}");
        }
    }
});
