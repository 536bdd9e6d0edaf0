//! Wire types of the typed requests: each checks its value while it deserializes, and
//! describes the same rule in `/openapi.json`.

use std::borrow::Cow;
use std::fmt;

use mailroom_actors::error::field_de_error;
use mailroom_actors::FieldCode;
use serde::{Deserialize, Deserializer};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// Names of records and senders.
pub type Name = Text<200>;
/// RFC 5322 caps a header line at 998 characters.
pub type Subject = Text<998>;
pub type Description = Text<1000>;
/// A stored template's or campaign's HTML.
pub type Html = Text<{ 1 << 20 }>;

/// A string, trimmed, of 1 to `MAX` characters. (Request structs name it through an
/// alias such as `Name`: utoipa's derive reads a const argument as a type.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<const MAX: usize>(String);

impl<const MAX: usize> Text<MAX> {
    pub fn into_string(self) -> String {
        self.0
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<const MAX: usize> fmt::Display for Text<MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de, const MAX: usize> Deserialize<'de> for Text<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        // Counted as sent, as the schema's maxLength counts.
        if raw.chars().count() > MAX {
            return Err(field_de_error(
                FieldCode::TooBig,
                format_args!("String must contain at most {MAX} character(s)"),
            ));
        }
        // Control characters go with the white space at the ends (Python's `\s`, which
        // schema checkers use, counts some of them as white space; Rust's trim does not).
        let s = raw.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        if s.is_empty() {
            return Err(field_de_error(
                FieldCode::TooSmall,
                "String must contain at least 1 character(s)",
            ));
        }
        Ok(Text(s.to_owned()))
    }
}

impl<const MAX: usize> utoipa::PartialSchema for Text<MAX> {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(format!(
                "At most {MAX} characters; trimmed, and then not empty"
            )))
            // Not blank: a character that is neither white space nor a control character.
            .pattern(Some(r"[^\s\x00-\x1f\x7f-\x9f]"))
            .max_length(Some(MAX))
            .build()
            .into()
    }
}

/// One component per bound (`Text200`, ...), since the bound is part of the rule.
impl<const MAX: usize> utoipa::ToSchema for Text<MAX> {
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("Text{MAX}"))
    }
}

/// A sender's or recipient's display name: a `Name` with no control character anywhere.
/// A line break in a name would end the From/To header early, and lettre panics
/// building such a header, so the edge refuses it rather than the mailer failing later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayName(String);

/// The longest display name.
pub const MAX_DISPLAY_NAME_LEN: usize = 200;

/// The JSON Schema pattern of a display name: some non-space character, and no control
/// character (C0, DEL and C1, as `char::is_control` has them).
pub const DISPLAY_NAME_PATTERN: &str =
    r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// Why a display name is refused, if it is: checked on the text as sent, since trimming
/// would hide a line break at either end.
pub fn display_name_fault(raw: &str) -> Option<&'static str> {
    raw.chars()
        .any(char::is_control)
        .then_some("A display name cannot hold control characters (such as a line break)")
}

impl DisplayName {
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de> Deserialize<'de> for DisplayName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        if let Some(why) = display_name_fault(&raw) {
            return Err(field_de_error(FieldCode::InvalidString, why));
        }
        let name =
            Text::<MAX_DISPLAY_NAME_LEN>::deserialize(serde::de::value::StringDeserializer::<
                D::Error,
            >::new(raw))?;
        Ok(DisplayName(name.into_string()))
    }
}

impl utoipa::PartialSchema for DisplayName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(format!(
                "At most {MAX_DISPLAY_NAME_LEN} characters, no control characters; trimmed, \
                 and then not empty"
            )))
            .pattern(Some(DISPLAY_NAME_PATTERN))
            .max_length(Some(MAX_DISPLAY_NAME_LEN))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for DisplayName {}

/// A field of a PATCH that can be left out (stays as it is), null (cleared) or set.
/// Use with `#[serde(default)]`, so that a missing field is `Absent`.
#[derive(Debug, Clone, Default)]
pub enum Nullable<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Nullable<T> {
    /// None to leave the field, Some(None) to clear it, Some(Some(v)) to set it.
    pub fn change(self) -> Option<Option<T>> {
        match self {
            Nullable::Absent => None,
            Nullable::Null => Some(None),
            Nullable::Value(v) => Some(Some(v)),
        }
    }

    /// `change`, with a value that must still be read (an id, a filter) and may fail.
    pub fn try_change<U, E>(
        self,
        read: impl FnOnce(T) -> Result<U, E>,
    ) -> Result<Option<Option<U>>, E> {
        self.change().map(|v| v.map(read).transpose()).transpose()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Nullable::Null,
            Some(v) => Nullable::Value(v),
        })
    }
}

/// `T` by reference, so that a component the document writes out in full (a grammar,
/// see `openapi::exact`) is the one a PATCH names.
impl<T: utoipa::ToSchema> utoipa::PartialSchema for Nullable<T> {
    fn schema() -> RefOr<Schema> {
        utoipa::openapi::schema::OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .item(utoipa::openapi::Ref::from_schema_name(T::name()))
            .description(Some("null clears it; leave it out to keep it"))
            .into()
    }
}

impl<T: utoipa::ToSchema> utoipa::ToSchema for Nullable<T> {
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("Nullable{}", T::name()))
    }

    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        out.push((T::name().into_owned(), T::schema()));
        T::schemas(out);
    }
}

/// A moment in ISO 8601 (RFC 3339, or a date alone for its midnight UTC), as ms.
#[derive(Debug, Clone, Copy)]
pub struct Instant(pub i64);

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        mailroom_actors::engine::requests::parse_instant(&s)
            .map(Instant)
            .ok_or_else(|| {
                field_de_error(
                    FieldCode::InvalidString,
                    "Invalid datetime: expected ISO 8601, such as 2026-12-01T09:00:00Z",
                )
            })
    }
}

impl utoipa::PartialSchema for Instant {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(utoipa::openapi::schema::SchemaFormat::KnownFormat(
                utoipa::openapi::schema::KnownFormat::DateTime,
            )))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for Instant {}

/// An array of `MIN` to `MAX` items.
#[derive(Debug, Clone)]
pub struct List<T, const MIN: usize, const MAX: usize>(pub Vec<T>);

impl<'de, T: Deserialize<'de>, const MIN: usize, const MAX: usize> Deserialize<'de>
    for List<T, MIN, MAX>
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<T>::deserialize(d)?;
        if items.len() < MIN {
            return Err(field_de_error(
                FieldCode::TooSmall,
                format_args!("Array must contain at least {MIN} element(s)"),
            ));
        }
        if items.len() > MAX {
            return Err(field_de_error(
                FieldCode::TooBig,
                format_args!("Array must contain at most {MAX} element(s)"),
            ));
        }
        Ok(List(items))
    }
}

impl<T: utoipa::ToSchema, const MIN: usize, const MAX: usize> utoipa::PartialSchema
    for List<T, MIN, MAX>
{
    fn schema() -> RefOr<Schema> {
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(T::schema())
            .min_items(Some(MIN))
            .max_items(Some(MAX))
            .build()
            .into()
    }
}

impl<T: utoipa::ToSchema, const MIN: usize, const MAX: usize> utoipa::ToSchema
    for List<T, MIN, MAX>
{
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("{}List{MIN}To{MAX}", T::name()))
    }
}

/// An event's name: 1 to 200 characters after trimming, none of them a control character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventName(String);

/// The longest event name.
pub const MAX_EVENT_NAME_LEN: usize = 200;

impl EventName {
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de> Deserialize<'de> for EventName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = Text::<MAX_EVENT_NAME_LEN>::deserialize(d)?.into_string();
        if name.chars().any(char::is_control) {
            return Err(field_de_error(
                FieldCode::InvalidString,
                "The event name cannot hold control characters",
            ));
        }
        Ok(EventName(name))
    }
}

impl EventName {
    /// The schema, which `/openapi.json` carries as written (see `openapi::exact`):
    /// utoipa's types have no `not`, which says what is reserved.
    pub fn json_schema() -> serde_json::Value {
        // Control characters are C0, DEL and C1, as `char::is_control` has them.
        let no_control = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";
        // The service's own names, in any case (checked after trimming).
        let reserved = r"^\s*([Ee][Mm][Aa][Ii][Ll]\.|[Cc][Oo][Nn][Tt][Aa][Cc][Tt]\.([Uu][Nn])?[Ss][Uu][Bb][Ss][Cc][Rr][Ii][Bb][Ee][Dd]\s*$|[Ss][Ee][Gg][Mm][Ee][Nn][Tt]\..*\.([Ee][Nn][Tt][Rr][Yy]|[Ee][Xx][Ii][Tt])\s*$)";
        serde_json::json!({
            "type": "string",
            "description": "1 to 200 characters, no control characters. Reserved (422 \
                reserved_event): email.*, contact.subscribed, contact.unsubscribed, \
                segment.*.entry, segment.*.exit",
            "maxLength": MAX_EVENT_NAME_LEN,
            "pattern": no_control,
            "not": {"pattern": reserved},
        })
    }
}

/// A stand-in: the document replaces it with `json_schema()`.
impl utoipa::PartialSchema for EventName {
    fn schema() -> RefOr<Schema> {
        RefOr::T(Schema::default())
    }
}

/// `EventName` in the document is the answer of GET /events/names.
impl utoipa::ToSchema for EventName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TrackedEventName")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_trims_and_refuses_blank_or_long_strings() {
        let ok: Text<6> = serde_json::from_str(r#""  abc ""#).unwrap();
        assert_eq!(ok.as_str(), "abc");
        let padded = serde_json::from_str::<Text<5>>(r#""  abc ""#).unwrap_err();
        assert!(
            padded.to_string().starts_with("too_big: "),
            "counted as sent: {padded}"
        );
        let control = serde_json::from_str::<Text<5>>(r#""\u001f""#).unwrap_err();
        assert!(control.to_string().starts_with("too_small: "), "{control}");
        let blank = serde_json::from_str::<Text<5>>(r#""   ""#).unwrap_err();
        assert!(blank.to_string().starts_with("too_small: "), "{blank}");
        let long = serde_json::from_str::<Text<5>>(r#""abcdef""#).unwrap_err();
        assert!(long.to_string().starts_with("too_big: "), "{long}");
    }

    #[test]
    fn a_display_name_refuses_control_characters_anywhere() {
        let ok: DisplayName = serde_json::from_str(r#"" Ada Lovelace ""#).unwrap();
        assert_eq!(ok.into_string(), "Ada Lovelace");
        for bad in [
            r#""Ada\r\nBcc: x@y.z""#,
            r#""Ada\n""#,
            r#""\tAda""#,
            r#""A\u0085da""#,
        ] {
            let e = serde_json::from_str::<DisplayName>(bad).unwrap_err();
            assert!(e.to_string().starts_with("invalid_string: "), "{bad}: {e}");
        }
        let long = serde_json::from_str::<DisplayName>(&format!("\"{}\"", "a".repeat(201)));
        assert!(long.unwrap_err().to_string().starts_with("too_big: "));
    }
}
