//! A benchmark point: the nine fields that say *what* was measured, as one
//! type from the agent's job to the database row to the CSV cell.

use serde::{Deserialize, Serialize};

use crate::algorithm::Algorithm;
use crate::path::Path;
use crate::provider::Provider;
use crate::spec::{Direction, JobSpec, KeyMode, Nonce};

/// What one result measures. A [`JobSpec`] is a point plus how long to measure it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point {
    pub algorithm: Algorithm,
    pub direction: Direction,
    /// Plaintext bytes per operation.
    pub size_bytes: u64,
    /// Worker threads.
    pub threads: u32,
    /// Objects in flight (object-storage scenario), or `None`.
    pub concurrency: Option<u32>,
    pub key_mode: KeyMode,
    /// The path asked for (what ran is the result's `path_used`).
    pub path: Path,
    /// Counter or random nonces (random only for AEAD encryption); counter
    /// where a record predates the field.
    #[serde(default)]
    pub nonce: Nonce,
    /// The implementation measured; RustCrypto (the built-in crates) where a
    /// record predates the field, and left out of JSON when it is.
    #[serde(default, skip_serializing_if = "Provider::is_rustcrypto")]
    pub provider: Provider,
}

impl Point {
    /// The job that measures this point for `seconds`.
    pub fn spec(self, seconds: f64) -> JobSpec {
        JobSpec { point: self, seconds }
    }
}

/// Reads a point from the columns `algorithm, direction, size_bytes, threads,
/// concurrency, key_mode, path, nonce` and, where the row has it, `provider`
/// of a PostgreSQL row (`result_points` holds the built-in provider's points
/// alone and has no such column: a row without it is RustCrypto's), so a row struct can
/// `#[sqlx(flatten)] point: Point`. A stored value that no longer parses is a
/// decode error naming the column, not a panic. A concurrency of 0 reads as
/// `None`: `result_points` stores "no concurrency" as 0 so that it can be part
/// of a primary key.
#[cfg(feature = "sqlx")]
impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for Point {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row;
        fn text<T>(row: &sqlx::postgres::PgRow, column: &str) -> Result<T, sqlx::Error>
        where
            T: std::str::FromStr,
            T::Err: std::error::Error + Send + Sync + 'static,
        {
            let raw: String = row.try_get(column)?;
            raw.parse().map_err(|e| sqlx::Error::ColumnDecode {
                index: column.to_string(),
                source: Box::new(e),
            })
        }
        fn unsigned<T: TryFrom<i64>>(column: &str, value: i64) -> Result<T, sqlx::Error> {
            T::try_from(value).map_err(|_| sqlx::Error::ColumnDecode {
                index: column.to_string(),
                source: format!("{value} is out of range").into(),
            })
        }
        let size: i64 = row.try_get("size_bytes")?;
        let threads: i32 = row.try_get("threads")?;
        let concurrency: Option<i32> = row.try_get("concurrency")?;
        Ok(Point {
            algorithm: text(row, "algorithm")?,
            direction: text(row, "direction")?,
            size_bytes: unsigned("size_bytes", size)?,
            threads: unsigned("threads", i64::from(threads))?,
            concurrency: concurrency
                .filter(|c| *c != 0)
                .map(|c| unsigned("concurrency", i64::from(c)))
                .transpose()?,
            key_mode: text(row, "key_mode")?,
            path: text(row, "path")?,
            nonce: text(row, "nonce")?,
            provider: match row.try_get::<String, _>("provider") {
                Ok(raw) => raw.parse().map_err(|e| sqlx::Error::ColumnDecode {
                    index: "provider".into(),
                    source: Box::new(e),
                })?,
                Err(sqlx::Error::ColumnNotFound(_)) => Provider::RustCrypto,
                Err(e) => return Err(e),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_and_its_spec_convert_both_ways() {
        let p = Point {
            algorithm: "aes-256-gcm".parse().unwrap(),
            direction: Direction::Decrypt,
            size_bytes: 16384,
            threads: 2,
            concurrency: Some(4),
            key_mode: KeyMode::Static,
            path: Path::Software,
            nonce: Nonce::Random,
            provider: crate::provider::Provider::RustCrypto,
        };
        let spec = p.spec(0.5);
        assert_eq!(spec.seconds, 0.5);
        assert_eq!(spec.point, p);
        let json = serde_json::to_value(p).unwrap();
        assert_eq!(json["direction"], "decrypt");
        assert_eq!(json["path"], "software");
        assert_eq!(json["nonce"], "random");
        assert_eq!(serde_json::from_value::<Point>(json).unwrap(), p);
    }
}
