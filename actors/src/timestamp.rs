//! Timestamps: stored as milliseconds since the epoch, shown as ISO 8601 UTC with
//! milliseconds and a `Z`, as the API contract asks.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn from_datetime(t: DateTime<Utc>) -> Self {
        Timestamp(t.timestamp_millis())
    }

    pub fn millis(&self) -> i64 {
        self.0
    }

    pub fn to_datetime(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.0)
            .single()
            .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
    }

    pub fn to_iso(&self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

impl From<i64> for Timestamp {
    fn from(ms: i64) -> Self {
        Timestamp(ms)
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp::from_datetime(t)
    }
}

/// The wire form is always the ISO string; stored records keep the integer.
impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_iso())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_form_has_milliseconds_and_a_z() {
        let t = Timestamp::from(1_795_000_000_123);
        assert_eq!(t.to_iso(), "2026-11-18T11:06:40.123Z");
    }
}
