//! `openssl speed -elapsed -evp`: the command line for a point, and its output read back.
//!
//! The agent asks for the machine-readable form (`-mr`, since 0.9.8): on
//! stderr `+DT:name:seconds:size` as each size starts and `+R:count:name:elapsed`
//! as it ends; on stdout `+H:size:size…` and `+F:index:name:bytes/s:bytes/s…`. With
//! `-multi` the children's lines come prefixed with `Got:` and the parent adds
//! one `+F` line of their sums. Without `-mr` (or from a build that ignores it)
//! the human table is read instead: `The 'numbers' are in 1000s of bytes per
//! second processed.`, a `type  16 bytes  64 bytes…` header and one row in
//! thousands (`…k`).
//!
//! 1.0.2 has neither `-bytes` nor `-seconds`: it measures 16, 64, 256, 1024 and
//! 8192 bytes for 3 s each.

/// The sizes an OpenSSL without `-bytes` measures (1.0.2; 1.1.x and later add 16384).
pub const FIXED_SIZES_1_0_2: [u64; 5] = [16, 64, 256, 1024, 8192];

/// How to run one `openssl speed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpeedArgs {
    /// The EVP cipher, as OpenSSL names it (`aes-256-gcm`).
    pub cipher: String,
    /// `-aead`: GCM, CCM and OCB as messages (3.0 and later).
    pub aead: bool,
    /// `-decrypt` (1.1.1 and later).
    pub decrypt: bool,
    /// `-bytes N`, where the build takes it.
    pub bytes: Option<u64>,
    /// `-seconds S`, where the build takes it.
    pub seconds: Option<u32>,
    /// `-multi T` for more than one process.
    pub multi: Option<u32>,
}

impl SpeedArgs {
    /// The arguments after the binary.
    pub fn to_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["speed".into(), "-elapsed".into(), "-mr".into()];
        if let Some(s) = self.seconds {
            a.extend(["-seconds".into(), s.to_string()]);
        }
        if let Some(b) = self.bytes {
            a.extend(["-bytes".into(), b.to_string()]);
        }
        if let Some(m) = self.multi.filter(|m| *m > 1) {
            a.extend(["-multi".into(), m.to_string()]);
        }
        if self.decrypt {
            a.push("-decrypt".into());
        }
        if self.aead {
            a.push("-aead".into());
        }
        a.extend(["-evp".into(), self.cipher.clone()]);
        a
    }
}

/// One size's result.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeResult {
    pub size: u64,
    /// All processes together.
    pub bytes_per_second: f64,
    /// Operations and elapsed seconds, where one process's `+R` line gave them.
    pub operations: Option<u64>,
    pub seconds: Option<f64>,
}

/// The results in `output` (stderr and stdout together), size by size, or
/// what openssl said instead.
pub fn parse(output: &str) -> Result<Vec<SizeResult>, String> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let fields = |l: &str| l.split(':').map(str::to_string).collect::<Vec<_>>();
    let multi = lines.iter().any(|l| l.starts_with("Forked child"));
    // One process: each +R closes the +DT before it.
    let mut timed: Vec<(u64, u64, f64)> = Vec::new();
    if !multi {
        let mut size = None;
        for l in &lines {
            let f = fields(l);
            match f.first().map(String::as_str) {
                Some("+DT") if f.len() >= 4 => size = f[3].parse::<u64>().ok(),
                Some("+R") if f.len() >= 4 => {
                    if let (Some(s), Ok(count), Ok(secs)) = (size.take(), f[1].parse(), f[3].parse()) {
                        timed.push((s, count, secs));
                    }
                }
                _ => {}
            }
        }
    }
    let unprefixed = |l: &&str| {
        l.strip_prefix("Got: ")
            .unwrap_or(l)
            .split(" from ")
            .next()
            .unwrap_or("")
            .to_string()
    };
    let sizes: Option<Vec<u64>> = lines
        .iter()
        .rev()
        .map(unprefixed)
        .find(|l| l.starts_with("+H:"))
        .map(|l| l.split(':').skip(1).filter_map(|s| s.parse().ok()).collect());
    let totals: Option<Vec<f64>> = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("+F:"))
        .map(|l| l.split(':').skip(3).filter_map(|s| s.parse().ok()).collect());
    let pairs: Vec<(u64, f64)> = match (sizes, totals) {
        (Some(sizes), Some(totals)) if !sizes.is_empty() && sizes.len() == totals.len() => {
            sizes.into_iter().zip(totals).collect()
        }
        _ => table(&lines).unwrap_or_default(),
    };
    if pairs.is_empty() {
        let said: Vec<&str> = lines.iter().copied().filter(|l| !l.is_empty()).take(3).collect();
        return Err(if said.is_empty() {
            "openssl speed printed no results".to_string()
        } else {
            format!("openssl speed printed no results: {}", said.join(" | "))
        });
    }
    Ok(pairs
        .into_iter()
        .map(|(size, bytes_per_second)| {
            let run = timed.iter().find(|(s, _, _)| *s == size);
            SizeResult {
                size,
                bytes_per_second,
                operations: run.map(|r| r.1),
                seconds: run.map(|r| r.2),
            }
        })
        .collect())
}

/// The human table: the header's `N bytes` columns, the next row's `…k` values (thousands).
fn table(lines: &[&str]) -> Option<Vec<(u64, f64)>> {
    let at = lines
        .iter()
        .position(|l| l.starts_with("type") && l.contains("bytes"))?;
    let words: Vec<&str> = lines[at].split_whitespace().collect();
    let sizes: Vec<u64> = words
        .windows(2)
        .filter(|w| w[1] == "bytes")
        .filter_map(|w| w[0].parse().ok())
        .collect();
    let row = lines.get(at + 1)?;
    let values: Vec<f64> = row
        .split_whitespace()
        .filter_map(|v| v.strip_suffix('k'))
        .filter_map(|v| v.parse::<f64>().ok())
        .map(|k| k * 1000.0)
        .collect();
    (sizes.len() == values.len() && !sizes.is_empty()).then(|| sizes.into_iter().zip(values).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/fixtures/openssl/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn only(name: &str) -> SizeResult {
        let r = parse(&fixture(name)).unwrap();
        assert_eq!(r.len(), 1, "{name}: {r:?}");
        r.into_iter().next().unwrap()
    }

    #[test]
    fn three_x_machine_readable_one_size() {
        let r = only("speed-mr-3.0-aes-256-gcm-16.txt");
        assert_eq!(r.size, 16);
        assert_eq!(r.bytes_per_second, 13860039.60);
        assert_eq!((r.operations, r.seconds), (Some(874915), Some(1.01)));
        // +R and +F agree: count × size / elapsed.
        assert!((874915.0 * 16.0 / 1.01 - r.bytes_per_second).abs() < 1.0);
        let masked = only("speed-mr-3.0-masked-aes-256-gcm.txt");
        assert_eq!((masked.size, masked.operations), (16384, Some(3117)));
    }

    #[test]
    fn three_x_machine_readable_every_size() {
        let r = parse(&fixture("speed-mr-3.0-chacha20-poly1305-all.txt")).unwrap();
        let sizes: Vec<u64> = r.iter().map(|s| s.size).collect();
        assert_eq!(sizes, [16, 64, 256, 1024, 8192, 16384]);
        assert_eq!(r[5].bytes_per_second, 1435128123.08);
        assert_eq!((r[5].operations, r[5].seconds), (Some(91097), Some(1.04)));
    }

    #[test]
    fn multi_sums_the_children_and_times_none() {
        let r = only("speed-mr-3.0-multi-aes-256-ctr.txt");
        assert_eq!((r.size, r.bytes_per_second), (16384, 1436745728.00));
        assert_eq!(r.operations, None, "interleaved children's +R lines are not one run");
        let old = parse(&fixture("speed-mr-1.0.2-multi-aes-128-cbc.txt")).unwrap();
        assert_eq!(old.len(), 5);
        assert_eq!(old[0].bytes_per_second, 746920368.00);
    }

    #[test]
    fn one_one_one_machine_readable_and_table() {
        let r = only("speed-mr-1.1.1-aes-128-gcm-16.txt");
        assert_eq!(
            (r.size, r.bytes_per_second, r.operations),
            (16, 407425424.00, Some(25464089))
        );
        let t = parse(&fixture("speed-table-1.1.1-aes-128-gcm.txt")).unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(t[5].size, 16384);
        assert!((t[5].bytes_per_second - 3796543490.0).abs() < 1.0, "{t:?}");
    }

    #[test]
    fn one_zero_two_has_five_fixed_sizes() {
        let r = parse(&fixture("speed-mr-1.0.2-aes-128-cbc.txt")).unwrap();
        assert_eq!(r.iter().map(|s| s.size).collect::<Vec<_>>(), FIXED_SIZES_1_0_2);
        assert_eq!((r[4].operations, r[4].seconds), (Some(151131), Some(3.0)));
        let t = parse(&fixture("speed-table-1.0.2-aes-128-cbc.txt")).unwrap();
        assert_eq!(t.iter().map(|s| s.size).collect::<Vec<_>>(), FIXED_SIZES_1_0_2);
        assert!((t[0].bytes_per_second - 378931270.0).abs() < 1.0);
    }

    #[test]
    fn three_x_table_without_mr() {
        let t = parse(&fixture("speed-table-3.0-aes-128-cbc.txt")).unwrap();
        assert_eq!(t.len(), 6);
        assert!((t[0].bytes_per_second - 295118020.0).abs() < 1.0);
    }

    #[test]
    fn an_unknown_cipher_is_an_error_quoting_openssl() {
        let e = parse(&fixture("speed-3.0-unknown-cipher.txt")).unwrap_err();
        assert!(e.contains("nosuch is an unknown cipher"), "{e}");
    }

    #[test]
    fn arguments_follow_the_builds_flags() {
        let a = SpeedArgs {
            cipher: "aes-256-gcm".into(),
            aead: true,
            decrypt: false,
            bytes: Some(16384),
            seconds: Some(1),
            multi: Some(2),
        };
        assert_eq!(
            a.to_args().join(" "),
            "speed -elapsed -mr -seconds 1 -bytes 16384 -multi 2 -aead -evp aes-256-gcm"
        );
        let old = SpeedArgs {
            aead: false,
            bytes: None,
            seconds: None,
            multi: None,
            ..a
        };
        assert_eq!(old.to_args().join(" "), "speed -elapsed -mr -evp aes-256-gcm");
    }
}
