//! When a schedule is due: every period, optionally anchored to a time of
//! the UTC day, each firing delayed by a random part of its jitter. Pure
//! functions over timestamps, plus the parsers of `--every`, `--at` and
//! `--jitter`, so the CLI and the server reject the same input.

use chrono::{DateTime, Duration, NaiveTime, Timelike, Utc};

/// Shortest period: a firing every second is already a campaign storm.
pub const MIN_EVERY_SECONDS: i64 = 1;
/// Longest period: a year.
pub const MAX_EVERY_SECONDS: i64 = 366 * 86_400;

/// A schedule's rhythm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub every_seconds: i64,
    /// Minutes after midnight UTC; due times are that minute plus whole periods.
    pub at_minute: Option<i32>,
    pub jitter_seconds: i64,
}

/// A rhythm that cannot be kept, named for the flag it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct InvalidTiming {
    pub flag: &'static str,
    pub message: String,
}

fn invalid(flag: &'static str, message: impl Into<String>) -> InvalidTiming {
    InvalidTiming {
        flag,
        message: message.into(),
    }
}

impl Timing {
    /// Checks the bounds the database also enforces.
    pub fn validate(&self) -> Result<(), InvalidTiming> {
        if !(MIN_EVERY_SECONDS..=MAX_EVERY_SECONDS).contains(&self.every_seconds) {
            return Err(invalid(
                "--every",
                format!(
                    "{} s is out of range; accepted {MIN_EVERY_SECONDS} s to 366 days",
                    self.every_seconds
                ),
            ));
        }
        if let Some(m) = self.at_minute
            && !(0..1440).contains(&m)
        {
            return Err(invalid("--at", format!("minute {m} of the day is out of range")));
        }
        if self.jitter_seconds < 0 || self.jitter_seconds >= self.every_seconds {
            return Err(invalid(
                "--jitter",
                format!(
                    "{} s must be shorter than the period ({} s)",
                    self.jitter_seconds, self.every_seconds
                ),
            ));
        }
        Ok(())
    }

    fn every(&self) -> Duration {
        Duration::seconds(self.every_seconds)
    }

    /// The first due time of a schedule created at `now`: at once, or with
    /// `--at` the first `HH:MM + k × period` at or after `now`.
    pub fn first_due(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.anchor(now) {
            None => now,
            Some(anchor) => self.at_or_after(anchor, now),
        }
    }

    /// The due time after `due` once it fired or was skipped at `now`: the next
    /// `due + k × period` after `now`. Due times missed while no coordinator
    /// ran are dropped, not fired in a burst.
    pub fn next_due(&self, due: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        let next = self.at_or_after(due, now);
        if next <= now { next + self.every() } else { next }
    }

    /// When a due time fires: `due` plus `random` (in 0..1) of the jitter.
    pub fn fire_at(&self, due: DateTime<Utc>, random: f64) -> DateTime<Utc> {
        let offset = (self.jitter_seconds as f64 * random.clamp(0.0, 1.0)) as i64;
        due + Duration::seconds(offset.min((self.jitter_seconds - 1).max(0)))
    }

    /// Today's `--at` time.
    fn anchor(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let m = u32::try_from(self.at_minute?).ok()?;
        let time = NaiveTime::from_hms_opt(m / 60, m % 60, 0)?;
        Some(now.date_naive().and_time(time).and_utc())
    }

    /// The first `from + k × period` (k any integer) at or after `now`.
    fn at_or_after(&self, from: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        let every = self.every_seconds;
        let behind = (now - from).num_seconds();
        // ceil(behind / every) for either sign.
        let k = behind.div_euclid(every) + i64::from(behind.rem_euclid(every) != 0);
        let candidate = from + Duration::seconds(k * every);
        // Sub-second parts: never answer a time before `now`.
        if candidate < now {
            candidate + self.every()
        } else {
            candidate
        }
    }
}

/// A random number in 0..1 for [`Timing::fire_at`]: the OS's randomness via a v4 UUID
/// (already a dependency; jitter needs no more than spread).
pub fn random_fraction() -> f64 {
    // The low 53 bits: clear of the version and variant bits.
    (uuid::Uuid::new_v4().as_u128() & ((1 << 53) - 1)) as f64 / (1u64 << 53) as f64
}

/// Parses a duration such as `30s`, `15m`, `24h`, `7d` or `1h30m` into seconds.
pub fn parse_duration(flag: &'static str, s: &str) -> Result<i64, InvalidTiming> {
    let bad = || {
        invalid(
            flag,
            format!("{s:?} is not a duration; write e.g. 30s, 15m, 24h, 7d or 1h30m"),
        )
    };
    let text = s.trim();
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: i64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| invalid(flag, format!("{s:?} is too long")))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(invalid(
            flag,
            format!("{s:?} needs a unit: s, m, h or d (e.g. {s}s or {s}h)"),
        ));
    }
    Ok(total)
}

/// Parses `--at HH:MM` (UTC) into minutes after midnight.
pub fn parse_time_of_day(s: &str) -> Result<i32, InvalidTiming> {
    let t = NaiveTime::parse_from_str(s.trim(), "%H:%M").map_err(|_| {
        invalid(
            "--at",
            format!("{s:?} is not a time of day; write HH:MM in UTC, 00:00 to 23:59"),
        )
    })?;
    Ok((t.hour() * 60 + t.minute()) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn timing(every: &str, at: Option<&str>) -> Timing {
        Timing {
            every_seconds: parse_duration("--every", every).unwrap(),
            at_minute: at.map(|a| parse_time_of_day(a).unwrap()),
            jitter_seconds: 0,
        }
    }

    #[test]
    fn durations_parse_with_units_and_combinations() {
        for (text, seconds) in [
            ("5s", 5),
            ("15m", 900),
            ("24h", 86_400),
            ("7d", 604_800),
            ("1h30m", 5400),
        ] {
            assert_eq!(parse_duration("--every", text), Ok(seconds), "{text}");
        }
        for bad in ["", "24", "h", "1x", "1.5h", "-1h", "99999999999999999999d"] {
            let e = parse_duration("--every", bad).unwrap_err();
            assert_eq!(e.flag, "--every", "{bad}");
        }
        assert!(
            parse_duration("--every", "24")
                .unwrap_err()
                .message
                .contains("needs a unit")
        );
    }

    #[test]
    fn times_of_day_parse_and_bad_ones_are_named() {
        assert_eq!(parse_time_of_day("02:00"), Ok(120));
        assert_eq!(parse_time_of_day("23:59"), Ok(1439));
        for bad in ["24:00", "2", "02:60", "noon"] {
            let e = parse_time_of_day(bad).unwrap_err();
            assert!(e.to_string().starts_with("--at") && e.message.contains("HH:MM"), "{e}");
        }
    }

    #[test]
    fn the_first_due_time_is_now_or_the_next_at_time() {
        let now = t("2026-12-01T15:00:00Z");
        assert_eq!(timing("24h", None).first_due(now), now);
        let cases = [
            ("24h", "02:00", "2026-12-02T02:00:00Z"),
            ("24h", "16:30", "2026-12-01T16:30:00Z"),
            ("12h", "02:00", "2026-12-02T02:00:00Z"),
            ("6h", "23:00", "2026-12-01T17:00:00Z"),
            ("24h", "15:00", "2026-12-01T15:00:00Z"),
        ];
        for (every, at, want) in cases {
            assert_eq!(timing(every, Some(at)).first_due(now), t(want), "every {every} at {at}");
        }
    }

    #[test]
    fn the_next_due_time_keeps_the_rhythm_and_drops_missed_periods() {
        let daily = timing("24h", Some("02:00"));
        let due = t("2026-12-01T02:00:00Z");
        // Fired on time, or a little late: the next day at 02:00.
        assert_eq!(daily.next_due(due, due), t("2026-12-02T02:00:00Z"));
        assert_eq!(
            daily.next_due(due, t("2026-12-01T02:00:05Z")),
            t("2026-12-02T02:00:00Z")
        );
        // No coordinator ran for three days: one firing, then back in rhythm.
        assert_eq!(
            daily.next_due(due, t("2026-12-04T09:00:00Z")),
            t("2026-12-05T02:00:00Z")
        );
        let fast = timing("5s", None);
        let due = t("2026-12-01T00:00:00Z");
        assert_eq!(
            fast.next_due(due, t("2026-12-01T00:00:00.3Z")),
            t("2026-12-01T00:00:05Z")
        );
        assert_eq!(fast.next_due(due, t("2026-12-01T00:00:05Z")), t("2026-12-01T00:00:10Z"));
    }

    #[test]
    fn jitter_delays_within_its_bound_and_must_be_shorter_than_the_period() {
        let mut j = timing("24h", None);
        j.jitter_seconds = 3600;
        let due = t("2026-12-01T02:00:00Z");
        assert_eq!(j.fire_at(due, 0.0), due);
        assert!(j.fire_at(due, 1.0) < due + Duration::hours(1));
        assert_eq!(j.fire_at(due, 0.5), due + Duration::minutes(30));
        let r = random_fraction();
        assert!((0.0..1.0).contains(&r), "{r}");
        assert!(j.validate().is_ok());
        j.jitter_seconds = 86_400;
        assert_eq!(j.validate().unwrap_err().flag, "--jitter");
        let zero = Timing {
            every_seconds: 0,
            at_minute: None,
            jitter_seconds: 0,
        };
        assert_eq!(zero.validate().unwrap_err().flag, "--every");
    }
}
