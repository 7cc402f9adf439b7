//! UTC timestamps for the audit log, as RFC 3339 text with microsecond precision
//! (`2026-12-02T11:02:32.123456Z`). Owns the calendar arithmetic (days <-> civil date, proleptic
//! Gregorian) so the wire format needs no date crate. Promises: formatting never panics, every
//! value is clamped to years 0000..=9999 so the text is always valid RFC 3339, and
//! `parse(format(t)) == t` for every [`Timestamp`].

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

const MICROS_PER_SEC: i64 = 1_000_000;
const SECS_PER_DAY: i64 = 86_400;

/// A point in time, microseconds since the Unix epoch, UTC, within years 0000..=9999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    micros: i64,
}

impl Timestamp {
    /// 0000-01-01T00:00:00.000000Z
    const MIN_MICROS: i64 = days_from_civil(0, 1, 1) * SECS_PER_DAY * MICROS_PER_SEC;
    /// 9999-12-31T23:59:59.999999Z
    const MAX_MICROS: i64 = days_from_civil(10_000, 1, 1) * SECS_PER_DAY * MICROS_PER_SEC - 1;

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

    pub fn from_unix_micros(micros: i64) -> Timestamp {
        Timestamp {
            micros: micros.clamp(Self::MIN_MICROS, Self::MAX_MICROS),
        }
    }

    pub fn unix_micros(self) -> i64 {
        self.micros
    }

    /// Parses the subset of RFC 3339 this module writes: `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`
    /// (`T`/`Z` in either case, digits beyond microseconds truncated). Other offsets are rejected:
    /// the audit log is UTC only.
    pub fn parse(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        if b.len() < 20 {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<i64> {
            let digits = b.get(range)?;
            digits.iter().try_fold(0i64, |acc, &c| {
                c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
            })
        };
        let sep = |i: usize, c: u8| b.get(i).is_some_and(|x| x.eq_ignore_ascii_case(&c));
        if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
            return None;
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let mut rest = &b[19..];
        let mut micros = 0i64;
        if let Some(frac) = rest.strip_prefix(b".") {
            let len = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if !(1..=9).contains(&len) {
                return None;
            }
            for i in 0..6 {
                let digit = frac.get(i).filter(|_| i < len).map_or(0, |&c| c - b'0');
                micros = micros * 10 + i64::from(digit);
            }
            rest = &frac[len..];
        }
        if !rest.eq_ignore_ascii_case(b"z") {
            return None;
        }
        let days = days_from_civil(year, month, day);
        let secs = days * SECS_PER_DAY + hour * 3600 + minute * 60 + second;
        Some(Timestamp::from_unix_micros(secs * MICROS_PER_SEC + micros))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.micros.div_euclid(MICROS_PER_SEC);
        let micros = self.micros.rem_euclid(MICROS_PER_SEC);
        let days = secs.div_euclid(SECS_PER_DAY);
        let of_day = secs.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            of_day / 3600,
            of_day / 60 % 60,
            of_day % 60
        )
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

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Both conversions count in 400-year eras (146,097 days each) of years that start on March 1st,
// so the leap day is the last day of its year and month lengths follow a fixed 153-day pattern
// per five months.

/// Days since 1970-01-01 of a civil date.
const fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 719,468 days separate 0000-03-01 from 1970-01-01.
    era * 146_097 + day_of_era - 719_468
}

/// Civil date (year, month 1-12, day 1-31) of a count of days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = (month_from_march + 2) % 12 + 1;
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    (year, month, day)
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
    fn civil_round_trip_over_many_days() {
        let mut expected = (1900, 1, 1);
        for days in days_from_civil(1900, 1, 1)..days_from_civil(2401, 1, 1) {
            assert_eq!(civil_from_days(days), expected);
            assert_eq!(days_from_civil(expected.0, expected.1, expected.2), days);
            let (y, m, d) = expected;
            expected = if d < days_in_month(y, m) {
                (y, m, d + 1)
            } else if m < 12 {
                (y, m + 1, 1)
            } else {
                (y + 1, 1, 1)
            };
        }
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
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T11:02:32.Z",
            "2026-12-02T11:02:32.1234567890Z",
            "+026-12-02T11:02:32Z",
            "2026-12-02T11:02:32Zjunk",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }
}
