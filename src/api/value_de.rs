//! A deserializer over a parsed JSON body whose errors are typed (`DeError`): a missing
//! field, a value of the wrong JSON type, an unknown enum variant, a wire type's coded
//! error. A rejected body is read again through it to list every field error, so the
//! 422's codes and messages come from what serde reports, not from its English text.
//!
//! It reads a `serde_json::Value` as serde_json's own `&Value` deserializer does (the
//! same visits for each JSON type), so what fails here is what failed in the bytes.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde_json::{Map, Value};

/// Why a field did not deserialize.
#[derive(Debug, Clone, PartialEq)]
pub enum DeError {
    /// A field the type requires is absent.
    Missing(&'static str),
    /// A value of another JSON type than the one expected (in the visitor's words).
    WrongType { got: JsonType, expected: String },
    /// A string that names none of the enum's variants.
    UnknownVariant { allowed: &'static [&'static str] },
    /// A value of the right type that the type refuses (a number out of range, say).
    InvalidValue(String),
    /// Anything else: a wire type's coded message (`field_de_error`), or serde's words.
    Custom(String),
}

/// The JSON types, as zod names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
    /// What JSON has no word for (serde's bytes or options).
    Other,
}

impl JsonType {
    fn of(u: &Unexpected) -> JsonType {
        match u {
            Unexpected::Unit => JsonType::Null,
            Unexpected::Bool(_) => JsonType::Boolean,
            Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => {
                JsonType::Number
            }
            Unexpected::Str(_) => JsonType::String,
            Unexpected::Seq => JsonType::Array,
            Unexpected::Map => JsonType::Object,
            _ => JsonType::Other,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
            JsonType::Other => "another type",
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeError::Missing(field) => write!(f, "missing field `{field}`"),
            DeError::WrongType { got, expected } => {
                write!(f, "invalid type: {}, expected {expected}", got.word())
            }
            DeError::UnknownVariant { allowed } => write!(f, "expected one of {allowed:?}"),
            DeError::InvalidValue(text) | DeError::Custom(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::Custom(msg.to_string())
    }

    fn invalid_type(unexp: Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::WrongType {
            got: JsonType::of(&unexp),
            expected: exp.to_string(),
        }
    }

    fn invalid_value(unexp: Unexpected, exp: &dyn de::Expected) -> Self {
        DeError::InvalidValue(format!("invalid value: {unexp}, expected {exp}"))
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DeError::InvalidValue(format!("invalid length {len}, expected {exp}"))
    }

    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::UnknownVariant { allowed: expected }
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::Missing(field)
    }
}

/// Reads `T` from a parsed body.
pub struct ValueDe<'a>(pub &'a Value);

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => visitor.visit_u64(u),
                (None, Some(i), _) => visitor.visit_i64(i),
                (None, None, Some(x)) => visitor.visit_f64(x),
                _ => Err(de::Error::custom("a number that fits no Rust number")),
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let mut seq = Seq(items.iter());
                let v = visitor.visit_seq(&mut seq)?;
                match seq.0.len() {
                    0 => Ok(v),
                    _ => Err(de::Error::invalid_length(
                        items.len(),
                        &"fewer elements in array",
                    )),
                }
            }
            Value::Object(map) => visit_object(map, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(Variant {
                name: s,
                value: None,
            }),
            Value::Object(map) if map.len() == 1 => {
                let (name, value) = map.iter().next().expect("one entry");
                visitor.visit_enum(Variant {
                    name,
                    value: Some(value),
                })
            }
            other => Err(de::Error::invalid_type(unexpected(other), &"string or map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn visit_object<'de, V: Visitor<'de>>(
    map: &'de Map<String, Value>,
    visitor: V,
) -> Result<V::Value, DeError> {
    let mut entries = Entries {
        iter: map.iter(),
        value: None,
    };
    let v = visitor.visit_map(&mut entries)?;
    match entries.iter.len() {
        0 => Ok(v),
        _ => Err(de::Error::invalid_length(
            map.len(),
            &"fewer elements in map",
        )),
    }
}

struct Seq<'de>(std::slice::Iter<'de, Value>);

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        self.0
            .next()
            .map(|v| seed.deserialize(ValueDe(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'de> {
    iter: serde_json::map::Iter<'de>,
    value: Option<&'de Value>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        self.value = Some(v);
        let key = de::value::BorrowedStrDeserializer::<DeError>::new(k);
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, DeError> {
        match self.value.take() {
            Some(v) => seed.deserialize(ValueDe(v)),
            None => Err(de::Error::custom("a value without its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct Variant<'de> {
    name: &'de str,
    value: Option<&'de Value>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let name = de::value::BorrowedStrDeserializer::<DeError>::new(self.name);
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        match self.value {
            None | Some(Value::Null) => Ok(()),
            Some(v) => Err(de::Error::invalid_type(unexpected(v), &"unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        match self.value {
            Some(v) => seed.deserialize(ValueDe(v)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DeError> {
        match self.value {
            Some(v @ Value::Array(_)) => de::Deserializer::deserialize_any(ValueDe(v), visitor),
            Some(v) => Err(de::Error::invalid_type(unexpected(v), &"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.value {
            Some(Value::Object(map)) => visit_object(map, visitor),
            Some(v) => Err(de::Error::invalid_type(unexpected(v), &"struct variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        name: String,
        count: Option<u32>,
        kind: Option<Kind>,
        tags: Option<Vec<String>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    enum Kind {
        Marketing,
        Transactional,
    }

    fn error(body: Value) -> DeError {
        Probe::deserialize(ValueDe(&body)).unwrap_err()
    }

    #[test]
    fn each_refusal_is_typed() {
        assert_eq!(error(serde_json::json!({})), DeError::Missing("name"));
        assert!(matches!(
            error(serde_json::json!({"name": 5})),
            DeError::WrongType {
                got: JsonType::Number,
                ..
            }
        ));
        assert!(matches!(
            error(serde_json::json!({"name": "a", "tags": [1]})),
            DeError::WrongType {
                got: JsonType::Number,
                ..
            }
        ));
        assert_eq!(
            error(serde_json::json!({"name": "a", "kind": "OTHER"})),
            DeError::UnknownVariant {
                allowed: &["MARKETING", "TRANSACTIONAL"]
            }
        );
        assert!(matches!(
            error(serde_json::json!({"name": "a", "count": -1})),
            DeError::InvalidValue(_)
        ));
        let fine: Probe = Probe::deserialize(ValueDe(
            &serde_json::json!({"name": "a", "kind": "MARKETING", "count": null}),
        ))
        .unwrap();
        assert!(matches!(fine.kind, Some(Kind::Marketing)) && fine.count.is_none());
    }
}
