//! Identifiers are UUID v7: they sort by creation time, so a key range scan over them
//! is a scan in creation order, and an id doubles as a stable cursor.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An id that can be read back from the 16 bytes it puts in a key. It lives with the
/// ids, below the store, so the store names the model and not the other way round.
pub trait KeyId: Sized {
    fn from_key_bytes(bytes: [u8; 16]) -> Self;
}

macro_rules! id_type {
    ($name:ident) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            pub fn new() -> Self {
                $name(Uuid::now_v7())
            }

            pub fn as_uuid(&self) -> Uuid {
                self.0
            }

            /// The 16 bytes of the UUID, which sort like the id (store keys).
            pub fn as_bytes(&self) -> &[u8; 16] {
                self.0.as_bytes()
            }
        }

        impl KeyId for $name {
            fn from_key_bytes(bytes: [u8; 16]) -> Self {
                $name(Uuid::from_bytes(bytes))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map($name)
            }
        }
    };
}

id_type!(ProjectId);
id_type!(ContactId);
id_type!(EventId);
id_type!(TemplateId);
id_type!(EmailId);
id_type!(DomainId);
id_type!(SegmentId);
id_type!(CampaignId);
id_type!(WorkflowId);
id_type!(ExecutionId);
id_type!(ImportId);
id_type!(WebhookId);
id_type!(DeliveryId);

impl EventId {
    /// An id that sorts at the event's own time (which comes from the injected clock),
    /// so that `since` / `until` are key ranges and newest-first is key order. Its other
    /// bits are a process-wide counter (from a random start), so ids made in one
    /// millisecond by this process increase in the order they were made: the events of
    /// one write (a tracked event, the segment entry it causes) list in order.
    pub fn at(t: crate::timestamp::Timestamp) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: std::sync::OnceLock<AtomicU64> = std::sync::OnceLock::new();
        let c = COUNTER
            .get_or_init(|| AtomicU64::new(rand::random::<u64>() >> 4))
            .fetch_add(1, Ordering::Relaxed);
        let ms = t.millis().clamp(0, (1 << 48) - 1) as u128;
        let hi = (ms << 80) | (0x7 << 76) | ((u128::from(c >> 62) & 0xfff) << 64);
        let lo = (0b10u128 << 62) | (u128::from(c) & ((1 << 62) - 1));
        EventId(Uuid::from_u128(hi | lo))
    }

    /// The time (ms) this id sorts at: what `at` and `floor` put in its first 6 bytes.
    pub fn millis(&self) -> i64 {
        let mut ms = [0u8; 8];
        ms[2..].copy_from_slice(&self.as_bytes()[..6]);
        i64::from_be_bytes(ms)
    }

    /// The smallest id an event at `t` can have: a bound for time ranges.
    pub fn floor(t: crate::timestamp::Timestamp) -> Self {
        let ms = t.millis().max(0) as u64;
        let mut bytes = [0u8; 16];
        bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        EventId(Uuid::from_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_sort_by_their_time_and_increase_within_a_millisecond() {
        let t = crate::timestamp::Timestamp::from(1_700_000_000_123);
        let ids: Vec<EventId> = (0..100).map(|_| EventId::at(t)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let later = EventId::at(crate::timestamp::Timestamp::from(1_700_000_000_124));
        assert!(EventId::floor(t) < ids[0] && ids[99] < EventId::floor(1_700_000_000_124.into()));
        assert!(ids[99] < later);
        assert!(
            ids[0].to_string() > EventId::floor(t).to_string(),
            "the text form sorts alike"
        );
    }
}
