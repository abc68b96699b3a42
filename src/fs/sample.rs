//! Sample workspaces: a deterministic generated tree with a realistic size mix, for the demo,
//! tests and benchmarks (the same mix as `shared/bench/make-synthetic-ws.py`).
//!
//! Most files are small source-like text, some larger repetitive text, a few incompressible
//! binaries, and one in a thousand large enough to be chunked; directories nest up to four
//! levels. The same seed and count always give the same bytes.

use std::fs;
use std::path::Path;

use crate::base::error::{Error, Result};

/// A small, fast, deterministic generator (xorshift64*): not for anything secret.
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A log-normal sample: `exp(mu + sigma * z)` for a standard normal `z`.
    pub fn lognormal(&mut self, mu: f64, sigma: f64) -> f64 {
        let (u1, u2) = (self.unit().max(1e-12), self.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (mu + sigma * z).exp()
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

const WORDS: &[&str] = &[
    "fn", "let", "mut", "pub", "struct", "impl", "match", "return", "self", "use", "crate", "mod", "async", "await",
    "const", "enum", "trait", "where", "type", "Some", "None", "Ok", "Err", "String", "Vec", "Result", "Option",
    "usize", "u64", "i32", "bool",
];

/// Source-like text of about `n` bytes.
pub fn text(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 80);
    while out.len() < n {
        for _ in 0..rng.below(4) {
            out.extend_from_slice(b"    ");
        }
        let words = 2 + rng.below(11);
        for w in 0..words {
            if w > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
        }
        out.push(b'\n');
    }
    out.truncate(n.max(1));
    out
}

/// Writes `files` files under `dir`; returns the total bytes written.
pub fn generate(dir: &Path, files: usize, seed: u64) -> Result<u64> {
    let mut rng = Rng::new(seed);
    let mut total = 0u64;
    for i in 0..files {
        let depth = 1 + rng.below(4);
        let mut d = dir.to_path_buf();
        for _ in 0..depth {
            d.push(format!("d{}", rng.below(10)));
        }
        fs::create_dir_all(&d).map_err(|e| Error::io("create", &d, e))?;
        let r = rng.unit();
        let data = if r < 0.80 {
            let n = rng_size(&mut rng, 8.0, 1.2);
            text(&mut rng, n)
        } else if r < 0.95 {
            let block = text(&mut rng, 20_000);
            block.repeat(1 + rng.below(2) as usize)
        } else if r < 0.999 {
            let n = rng_size(&mut rng, 10.0, 1.3);
            rng.bytes(n)
        } else {
            let n = (2 + rng.below(7) as usize) << 20;
            rng.bytes(n)
        };
        let ext = if r < 0.95 { "rs" } else { "bin" };
        let p = d.join(format!("f{i:06}.{ext}"));
        fs::write(&p, &data).map_err(|e| Error::io("write", &p, e))?;
        total += data.len() as u64;
    }
    Ok(total)
}

fn rng_size(rng: &mut Rng, mu: f64, sigma: f64) -> usize {
    rng.lognormal(mu, sigma).min(50_000_000.0) as usize
}
