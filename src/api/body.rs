//! The JSON body extractors. Both enforce `limits.max_body_bytes` (413) while reading and
//! turn anything that is not JSON into 400 BAD_REQUEST.
//!
//! `Body<T>` deserializes straight into a typed request (the same struct is the request's
//! schema in `/openapi.json`): a wrong type, a missing field or a value that a wire type
//! refuses is a 422 that names the field by its path, with zod's code.

use std::fmt;

use actix_web::dev::Payload;
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use mailroom_actors::error::FIELD_CODE_SEPARATOR;
use mailroom_actors::{Error, FieldCode, FieldError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;
use utoipa::openapi::{RefOr, Schema};
use utoipa::ToSchema;

use super::error::ApiError;
use super::validate::json_type;
use super::value_de::{DeError, JsonType, ValueDe};
use crate::state::AppState;
use mailroom_actors::engine::requests::near_misses as near_miss_errors;

/// A typed request body.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned + ToSchema + 'static> FromRequest for Body<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let read = read(req, payload);
        Box::pin(async move { parse(&read.await?).map(Body) })
    }
}

/// Reads the body, any bytes, under the configured limit (`limits.max_body_bytes`).
pub fn raw(
    req: &HttpRequest,
    payload: &mut Payload,
) -> LocalBoxFuture<'static, Result<web::BytesMut, ApiError>> {
    let limit = req
        .app_data::<web::Data<AppState>>()
        .map_or(1 << 20, |s| s.limits.max_body_bytes);
    read_within(req, payload, limit)
}

/// Reads a JSON body under the configured limit: an empty one is refused.
fn read(
    req: &HttpRequest,
    payload: &mut Payload,
) -> LocalBoxFuture<'static, Result<web::BytesMut, ApiError>> {
    let raw = raw(req, payload);
    Box::pin(async move {
        let buf = raw.await?;
        if buf.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::BadRequest(
                "The request body is empty; a JSON object is expected".into(),
            ));
        }
        Ok(buf)
    })
}

/// Reads the body, any bytes, refusing it with 413 past `limit`.
pub fn read_within(
    req: &HttpRequest,
    payload: &mut Payload,
    limit: usize,
) -> LocalBoxFuture<'static, Result<web::BytesMut, ApiError>> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut payload = payload.take();
    Box::pin(async move {
        if declared.is_some_and(|n| n > limit) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        let mut buf = web::BytesMut::with_capacity(declared.unwrap_or(0).min(limit));
        while let Some(chunk) = payload.next().await {
            let chunk =
                chunk.map_err(|e| ApiError::BadRequest(format!("Could not read the body: {e}")))?;
            if buf.len() + chunk.len() > limit {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    })
}

fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::BadRequest(format!("The body is not valid JSON: {e}"))
}

/// One pass over the bytes. serde_json stops at 128 levels of nesting, so deep input
/// cannot exhaust the stack.
pub fn parse<T: DeserializeOwned + ToSchema>(buf: &[u8]) -> Result<T, ApiError> {
    // serde would read `[...]` into a struct by position: every request is an object.
    if buf.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        object(buf)?;
    }
    let mut de = serde_json::Deserializer::from_slice(buf);
    match serde_path_to_error::deserialize(&mut de) {
        Ok(v) => {
            de.end().map_err(not_json)?;
            let keys: TopKeys = serde_json::from_slice(buf).map_err(not_json)?;
            let near = near_misses::<T>(keys.0.iter());
            if near.is_empty() {
                Ok(v)
            } else {
                Err(Error::Validation(near).into())
            }
        }
        Err(e) if e.inner().is_data() => {
            let body: Value = serde_json::from_slice(buf).map_err(not_json)?;
            let near = near_misses::<T>(body.as_object().into_iter().flat_map(|o| o.keys()));
            let (errors, _) = every_error::<T>(body);
            // What only the bytes show (a duplicate key) does not fail again as a Value.
            let mut errors = if errors.is_empty() {
                vec![bytes_error(e.path(), e.inner())]
            } else {
                errors
            };
            errors.extend(near);
            Err(Error::Validation(errors).into())
        }
        Err(e) => Err(not_json(e.into_inner())),
    }
}

/// The top-level keys of a JSON object, without keeping their values.
struct TopKeys(Vec<String>);

impl<'de> serde::Deserialize<'de> for TopKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TopKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<TopKeys, A::Error> {
                // Each key once: a hostile body may repeat one a million times.
                let mut keys = Vec::new();
                let mut seen = std::collections::HashSet::new();
                while let Some(k) = m.next_key::<String>()? {
                    m.next_value::<serde::de::IgnoredAny>()?;
                    if seen.insert(k.clone()) {
                        keys.push(k);
                    }
                }
                Ok(TopKeys(keys))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A 422 item for each top-level field that `T` does not declare but that is a near miss
/// of one it does (API reference, "Unknown fields").
fn near_misses<'k, T: DeserializeOwned>(keys: impl Iterator<Item = &'k String>) -> Vec<FieldError> {
    let known = declared_fields::<T>();
    if known.is_empty() {
        return Vec::new();
    }
    near_miss_errors(keys, known)
}

/// The body as a JSON object: 400 when it is not JSON, 422 when it is JSON of another kind.
fn object(buf: &[u8]) -> Result<Value, ApiError> {
    let json: Value = serde_json::from_slice(buf).map_err(not_json)?;
    if !json.is_object() {
        return Err(Error::field(
            "body",
            FieldCode::InvalidType,
            format!("Expected object, received {}", json_type(&json)),
        )
        .into());
    }
    Ok(json)
}

/// A typed request together with the JSON it came as, for the endpoints whose
/// `Idempotency-Key` compares bodies as JSON (key order and spacing do not count).
pub struct BodyJson<T>(pub T, pub Value);

impl<T: DeserializeOwned + ToSchema + 'static> FromRequest for BodyJson<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let partial = Partial::<T>::from_request(req, payload);
        Box::pin(async move {
            match partial.await? {
                Partial {
                    value: Some(body),
                    errors,
                    json,
                } if errors.is_empty() => Ok(BodyJson(body, json)),
                Partial { errors, .. } => Err(Error::Validation(errors).into()),
            }
        })
    }
}

/// A request that may have failed in some fields: the rest of it parsed (when nothing it
/// requires failed), with the errors, and the JSON it came as. For an endpoint whose
/// nested parts are checked field by field after parsing, so that one 422 lists the
/// problems of both steps.
pub struct Partial<T> {
    pub value: Option<T>,
    pub errors: Vec<FieldError>,
    pub json: Value,
}

impl<T: DeserializeOwned + ToSchema + 'static> FromRequest for Partial<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let read = read(req, payload);
        Box::pin(async move {
            let json = object(&read.await?)?;
            let (mut errors, value) = match T::deserialize(&json) {
                Ok(v) => (Vec::new(), Some(v)),
                Err(_) => every_error::<T>(json.clone()),
            };
            errors.extend(near_misses::<T>(
                json.as_object().into_iter().flat_map(|o| o.keys()),
            ));
            Ok(Partial {
                value,
                errors,
                json,
            })
        })
    }
}

/// serde stops at the first bad field, but a 422 lists them all: take out the top-level
/// field that failed and try again, until what remains parses or only missing fields are
/// left (serde names just the first of those; the schema's `required` names them all).
/// At most one round per declared field of `T`.
/// Also answers what remains of the request once the failed fields are taken out, when
/// that parses. Errors come in the order the request declares its fields, as zod lists them.
fn every_error<T: DeserializeOwned + ToSchema>(mut body: Value) -> (Vec<FieldError>, Option<T>) {
    let mut errors: Vec<FieldError> = Vec::new();
    let top_of = |field: &str| field.split('.').next().unwrap_or_default().to_owned();
    let order = declared_fields::<T>();
    let in_order = |mut errors: Vec<FieldError>| {
        errors.sort_by_key(|e| {
            let top = e.field.split('.').next().unwrap_or_default();
            order.iter().position(|f| *f == top).unwrap_or(usize::MAX)
        });
        errors
    };
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(ValueDe(&body)) {
            Ok(rest) => return (in_order(errors), Some(rest)),
            Err(e) => e,
        };
        let error = field_error(e.path(), e.inner());
        let top = top_of(&error.field);
        let missing_here = error.message == REQUIRED && !error.field.contains('.');
        if missing_here || errors.iter().any(|seen| top_of(&seen.field) == top) {
            break;
        }
        errors.push(error);
        if body.as_object_mut().and_then(|o| o.remove(&top)).is_none() {
            break;
        }
    }
    for field in required_fields::<T>() {
        let absent = body.get(&field).is_none_or(Value::is_null);
        if absent && !errors.iter().any(|seen| top_of(&seen.field) == field) {
            errors.push(FieldError::new(field, FieldCode::InvalidType, REQUIRED));
        }
    }
    (in_order(errors), None)
}

/// zod's word for a field that is missing.
const REQUIRED: &str = "Required";

/// What the request's schema marks required: the same derive that makes the document.
fn required_fields<T: ToSchema>() -> Vec<String> {
    match T::schema() {
        RefOr::T(Schema::Object(o)) => o.required,
        _ => Vec::new(),
    }
}

/// The field names a derived `Deserialize` struct declares, in order: serde hands them to
/// `deserialize_struct`, which is all this deserializer answers.
fn declared_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe(std::cell::Cell<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("probe")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for &Probe {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
            enum identifier ignored_any
        }
    }
    let probe = Probe(std::cell::Cell::new(&[]));
    let _ = T::deserialize(&probe);
    probe.0.get()
}

/// `a.b.0.c`, as the engine names nested fields.
fn dotted(path: &serde_path_to_error::Path) -> Vec<String> {
    path.iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect()
}

/// A field error in zod's words: `Required`, `Expected string, received number`, or the
/// code and message a wire type raised.
fn field_error(path: &serde_path_to_error::Path, e: &DeError) -> FieldError {
    let mut parts = dotted(path);
    let (code, message) = match e {
        DeError::Missing(field) => {
            parts.push((*field).to_owned());
            (FieldCode::InvalidType, REQUIRED.to_owned())
        }
        // As before typed parsing: null stands for a missing value.
        DeError::WrongType {
            got: JsonType::Null,
            ..
        } => (FieldCode::InvalidType, REQUIRED.to_owned()),
        DeError::WrongType { got, expected } => (
            FieldCode::InvalidType,
            format!(
                "Expected {}, received {}",
                expected_word(expected),
                got.word()
            ),
        ),
        DeError::UnknownVariant { allowed } => {
            let allowed: Vec<String> = allowed.iter().map(|v| format!("'{v}'")).collect();
            (
                FieldCode::InvalidEnumValue,
                format!("Expected {}", allowed.join(" | ")),
            )
        }
        DeError::InvalidValue(text) => (FieldCode::InvalidType, text.clone()),
        // A wire type's own error says its code first (`field_de_error`).
        DeError::Custom(text) => match text
            .split_once(FIELD_CODE_SEPARATOR)
            .and_then(|(c, m)| Some((FieldCode::parse(c)?, m)))
        {
            Some((code, message)) => (code, message.to_owned()),
            None => (FieldCode::Custom, text.clone()),
        },
    };
    let field = if parts.is_empty() {
        "body".to_owned()
    } else {
        parts.join(".")
    };
    FieldError::new(field, code, message)
}

/// What only the bytes show (a duplicate key): serde_json's words, without the position
/// (the field path says more).
fn bytes_error(path: &serde_path_to_error::Path, e: &serde_json::Error) -> FieldError {
    let text = e.to_string();
    let text = text
        .rfind(" at line ")
        .map_or(text.as_str(), |at| &text[..at]);
    let parts = dotted(path);
    let field = if parts.is_empty() {
        "body".to_owned()
    } else {
        parts.join(".")
    };
    FieldError::new(field, FieldCode::Custom, text)
}

/// What the visitor expected (its `expecting`, the one part serde gives only in words),
/// in JSON's words: `a string` is `string`, `u64` a `number`.
fn expected_word(expected: &str) -> &str {
    let e = expected.trim_start_matches("a ").trim_start_matches("an ");
    match e.split([' ', '`']).next().unwrap_or("") {
        "string" | "str" => "string",
        "boolean" | "bool" => "boolean",
        "u8" | "u16" | "u32" | "u64" | "i32" | "i64" | "f64" | "integer" | "number" => "number",
        "sequence" | "array" => "array",
        "map" | "struct" | "object" => "object",
        _ => e,
    }
}
