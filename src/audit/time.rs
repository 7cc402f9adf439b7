//! UTC timestamps for the audit log, as RFC 3339 text with microsecond precision
//! (`2026-12-02T11:02:32.123456Z`). The calendar is jiff's; this file owns only the wire shape.
//! Promises: formatting never panics, every value is clamped to years 0000..=9999 so the text is
//! always valid RFC 3339, and `parse(format(t)) == t` for every [`Timestamp`]. Query bounds
//! (`guard log --since`) are read by [`Timestamp::parse_bound`], which is more lenient.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use jiff::civil::DateTime;
use jiff::{SignedDuration, Span, SpanRelativeTo};

/// A point in time, microseconds since the Unix epoch, UTC, within years 0000..=9999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    micros: i64,
}

/// 1970-01-01T00:00:00, the civil time the micros count from.
const EPOCH: DateTime = jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0);

impl Timestamp {
    /// 0000-01-01T00:00:00.000000Z
    const MIN_MICROS: i64 = -62_167_219_200_000_000;
    /// 9999-12-31T23:59:59.999999Z
    const MAX_MICROS: i64 = 253_402_300_799_999_999;

    /// The current time, truncated to the microsecond.
    pub fn now() -> Timestamp {
        Timestamp::from_system(SystemTime::now())
    }

    /// Truncates to the microsecond (towards the past) and clamps to the representable range.
    pub fn from_system(t: SystemTime) -> Timestamp {
        let micros = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
            Err(e) => {
                let before = e.duration().as_nanos().div_ceil(1000);
                i64::try_from(before).map_or(i64::MIN, |m| -m)
            }
        };
        Timestamp::from_unix_micros(micros)
    }

    /// The time `micros` microseconds after the Unix epoch (before it when negative), clamped to
    /// years 0000..=9999.
    pub fn from_unix_micros(micros: i64) -> Timestamp {
        Timestamp {
            micros: micros.clamp(Self::MIN_MICROS, Self::MAX_MICROS),
        }
    }

    /// Microseconds since the Unix epoch (negative before it).
    pub fn unix_micros(self) -> i64 {
        self.micros
    }

    /// Parses the subset of RFC 3339 this module writes: `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`
    /// (`T`/`Z` in either case, digits beyond microseconds truncated). Other offsets are rejected:
    /// the audit log is UTC only.
    pub fn parse(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        let shape = b.len() >= 20
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[10].eq_ignore_ascii_case(&b'T')
            && b[b.len() - 1].eq_ignore_ascii_case(&b'Z')
            && match &b[19..b.len() - 1] {
                [] => true,
                [b'.', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
                _ => false,
            };
        if !shape {
            return None;
        }
        let civil: DateTime = s[..s.len() - 1].parse().ok()?;
        Some(Timestamp::from_civil(civil))
    }

    /// A bound for a query: RFC 3339 with any offset (`2026-05-01T08:00:00+02:00`), a UTC date
    /// (`2026-05-01`, its midnight), or a span back from `now` (`90s`, `30m`, `2h`, `7d`, `1w`,
    /// `1d12h`).
    pub fn parse_bound(s: &str, now: Timestamp) -> Option<Timestamp> {
        if let Ok(t) = s.parse::<jiff::Timestamp>() {
            return Some(Timestamp::from_unix_micros(t.as_microsecond()));
        }
        if let Ok(date) = s.parse::<jiff::civil::Date>() {
            return Some(Timestamp::from_civil(
                date.to_datetime(jiff::civil::Time::midnight()),
            ));
        }
        let span: Span = s.parse().ok()?;
        if span.is_negative() {
            return None;
        }
        let back = span.to_duration(SpanRelativeTo::days_are_24_hours()).ok()?;
        Some(Timestamp::from_unix_micros(
            now.micros
                .saturating_sub(i64::try_from(back.as_micros()).ok()?),
        ))
    }

    fn from_civil(civil: DateTime) -> Timestamp {
        let micros = i64::try_from(EPOCH.duration_until(civil).as_micros()).unwrap_or(i64::MAX);
        Timestamp::from_unix_micros(micros)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Always in range: the clamp keeps micros within years 0000..=9999, which a civil
        // DateTime covers.
        match EPOCH.checked_add(SignedDuration::from_micros(self.micros)) {
            Ok(civil) => write!(f, "{}", civil.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")),
            Err(_) => write!(f, "1970-01-01T00:00:00.000000Z"),
        }
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format_args!("invalid RFC 3339 UTC time {text:?}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(micros: i64) -> String {
        Timestamp::from_unix_micros(micros).to_string()
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59.999999Z");
        assert_eq!(at(951_782_400_000_000), "2000-02-29T00:00:00.000000Z");
        assert_eq!(at(1_796_209_352_123_456), "2026-12-02T11:02:32.123456Z");
        assert_eq!(at(i64::MAX), "9999-12-31T23:59:59.999999Z");
        assert_eq!(at(i64::MIN), "0000-01-01T00:00:00.000000Z");
    }

    #[test]
    fn from_system_truncates_to_microseconds() {
        let t = UNIX_EPOCH + Duration::new(1, 999_999_999);
        assert_eq!(Timestamp::from_system(t).unix_micros(), 1_999_999);
        let before = UNIX_EPOCH - Duration::from_nanos(1);
        assert_eq!(Timestamp::from_system(before).unix_micros(), -1);
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        // One instant per day from 1900 to 2400 (leap years of every kind), at 23:59:59.5.
        let day = 86_400_000_000i64;
        let start = Timestamp::parse("1900-01-01T23:59:59.5Z")
            .expect("start")
            .micros;
        let end = Timestamp::parse("2401-01-01T00:00:00Z")
            .expect("end")
            .micros;
        let mut previous = String::new();
        for micros in (start..end).step_by(day as usize) {
            let text = at(micros);
            assert!(text > previous, "{text} after {previous}");
            assert_eq!(Timestamp::parse(&text).map(|t| t.micros), Some(micros));
            previous = text;
        }
        assert_eq!(previous, "2400-12-31T23:59:59.500000Z");
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        for micros in [
            0,
            -1,
            1_796_209_352_123_456,
            i64::MAX,
            i64::MIN,
            86_399_999_999,
        ] {
            let t = Timestamp::from_unix_micros(micros);
            assert_eq!(Timestamp::parse(&t.to_string()), Some(t));
        }
        assert_eq!(
            Timestamp::parse("2026-12-02t11:02:32.1234569z").map(|t| t.to_string()),
            Some("2026-12-02T11:02:32.123456Z".to_owned())
        );
        assert_eq!(
            Timestamp::parse("2026-12-02T11:02:32Z").map(|t| t.to_string()),
            Some("2026-12-02T11:02:32.000000Z".to_owned())
        );
        for bad in [
            "",
            "2026-12-02T11:02:32",
            "2026-12-02T11:02:32+01:00",
            "2026-12-02T11:02:32+01:00Z",
            "2026-12-02 11:02:32Z",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T11:02:32.Z",
            "2026-12-02T11:02:32.1234567890Z",
            "+026-12-02T11:02:32Z",
            "+002026-12-02T11:02:32Z",
            "2026-12-02T11:02:32Zjunk",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn query_bounds() {
        let now = Timestamp::parse("2026-12-02T11:00:00Z").expect("now");
        let bound = |s: &str| Timestamp::parse_bound(s, now).map(|t| t.to_string());
        assert_eq!(bound("2h").as_deref(), Some("2026-12-02T09:00:00.000000Z"));
        assert_eq!(bound("7d").as_deref(), Some("2026-11-25T11:00:00.000000Z"));
        assert_eq!(bound("1w").as_deref(), Some("2026-11-25T11:00:00.000000Z"));
        assert_eq!(
            bound("1d12h").as_deref(),
            Some("2026-11-30T23:00:00.000000Z")
        );
        assert_eq!(bound("90s").as_deref(), Some("2026-12-02T10:58:30.000000Z"));
        assert_eq!(
            bound("2026-12-02T12:00:00+02:00").as_deref(),
            Some("2026-12-02T10:00:00.000000Z")
        );
        assert_eq!(
            bound("2026-12-01").as_deref(),
            Some("2026-12-01T00:00:00.000000Z")
        );
        for bad in ["", "yesterday", "2 fortnights", "-2h", "1mo"] {
            assert_eq!(bound(bad), None, "{bad}");
        }
    }
}
