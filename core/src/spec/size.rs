//! Payload sizes as flags and tables spell them.

use super::{InvalidSpec, invalid, validate_size};

/// Parses a payload size: a whole number of bytes with an optional binary suffix
/// (`k`, `K`, `KB`, `KiB` = 1024; `m`, `M`, `MB`, `MiB` = 1024²; `g`, `G`, `GB`, `GiB` = 1024³).
pub fn parse_size(s: &str) -> Result<u64, InvalidSpec> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let unparsable = || {
        invalid(
            "--size",
            format!("cannot parse '{s}'; examples: 11, 16, 1k, 16KiB, 10MiB"),
        )
    };
    let n: u64 = digits.parse().map_err(|_| unparsable())?;
    let mult: u64 = match suffix.trim() {
        "" | "b" | "B" => 1,
        "k" | "K" | "KB" | "kB" | "KiB" => 1 << 10,
        "m" | "M" | "MB" | "MiB" => 1 << 20,
        "g" | "G" | "GB" | "GiB" => 1 << 30,
        _ => return Err(unparsable()),
    };
    let size = n.checked_mul(mult).ok_or_else(unparsable)?;
    validate_size(size)?;
    Ok(size)
}

/// Formats a size the way tables show it: `16`, `1KiB`, `10MiB`.
pub fn format_size(size: u64) -> String {
    for (unit, mult) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if size >= mult && size.is_multiple_of(mult) {
            return format!("{}{unit}", size / mult);
        }
    }
    size.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            ("11", Ok(11)),
            ("18", Ok(18)),
            ("16", Ok(16)),
            ("1k", Ok(1024)),
            ("1K", Ok(1024)),
            ("16KiB", Ok(16384)),
            ("8KB", Ok(8192)),
            ("10MiB", Ok(10 * 1024 * 1024)),
            ("1m", Ok(1 << 20)),
            ("1GiB", Ok(1 << 30)),
            (" 64 ", Ok(64)),
            ("0", Err("--size")),
            ("2GiB", Err("--size")),
            ("abc", Err("--size")),
            ("", Err("--size")),
            ("16QiB", Err("--size")),
            ("-1", Err("--size")),
            ("99999999999999999999k", Err("--size")),
        ];
        for (input, want) in cases {
            match (parse_size(input), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, *w, "{input}"),
                (Err(e), Err(flag)) => assert_eq!(e.flag, *flag, "{input}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn size_errors_name_the_range() {
        let e = parse_size("0").unwrap_err().to_string();
        assert!(e.contains("--size") && e.contains("1 GiB"), "{e}");
    }

    #[test]
    fn sizes_format_back_compactly() {
        for (n, s) in [
            (11, "11"),
            (1024, "1KiB"),
            (16384, "16KiB"),
            (10 << 20, "10MiB"),
            (1536, "1536"),
        ] {
            assert_eq!(format_size(n), s);
        }
    }
}
