//! Picking top-level values out of a contact's `data` JSON text without parsing the
//! rest: what segment counts and the contact table's columns read a filter's keys with.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Fills `out[i]` with the top-level value named `keys[i]` of the JSON object `data`,
/// skipping every other value without building it, and stopping once all are found.
pub fn pick(data: &str, keys: &[String], out: &mut [Option<Value>]) {
    out.iter_mut().for_each(|o| *o = None);
    if keys.is_empty() || data.len() <= 2 {
        return;
    }
    let mut de = serde_json::Deserializer::from_str(data);
    // Stopping early leaves the rest unread, which serde_json reports as an error;
    // what was picked by then is what we wanted.
    let _ = de.deserialize_map(Pick {
        keys,
        out,
        found: 0,
    });
}

struct Pick<'k, 'o> {
    keys: &'k [String],
    out: &'o mut [Option<Value>],
    found: usize,
}

impl<'de> Visitor<'de> for Pick<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match self.keys.iter().position(|k| *k == key.0) {
                Some(i) => {
                    self.out[i] = Some(map.next_value()?);
                    self.found += 1;
                    if self.found == self.keys.len() {
                        return Ok(());
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A map key that borrows from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}
