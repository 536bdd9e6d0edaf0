//! Field-by-field parsing of a JSON object into domain values, collecting every field
//! error (with zod's codes and messages) so that one 422 lists them all.

use mailroom_actors::model::email::EmailError;
use mailroom_actors::model::{DataMap, EmailAddress};
use mailroom_actors::{Error, FieldCode, FieldError};
use serde_json::{Map, Value};

use super::error::ApiError;

pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    /// The body must be a JSON object.
    pub fn of(body: &'a Value) -> Result<Self, ApiError> {
        match body {
            Value::Object(map) => Ok(Fields {
                map,
                errors: Vec::new(),
            }),
            other => Err(Error::field(
                "body",
                FieldCode::InvalidType,
                format!("Expected object, received {}", json_type(other)),
            )
            .into()),
        }
    }

    pub fn error(&mut self, field: &str, code: FieldCode, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, code, message));
    }

    pub fn wrong_type(&mut self, field: &str, expected: &str, got: &Value) {
        self.error(
            field,
            FieldCode::InvalidType,
            format!("Expected {expected}, received {}", json_type(got)),
        );
    }

    /// A present, non-null value; `null` counts as absent for optional fields.
    fn present(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn required(&mut self, field: &str) -> Option<&'a Value> {
        let v = self.present(field);
        if v.is_none() {
            self.error(field, FieldCode::InvalidType, "Required");
        }
        v
    }

    pub fn email(&mut self, field: &str) -> Option<EmailAddress> {
        let v = self.required(field)?;
        let Some(s) = v.as_str() else {
            self.wrong_type(field, "string", v);
            return None;
        };
        match EmailAddress::parse(s) {
            Ok(e) => Some(e),
            Err(EmailError::TooLong) => {
                self.error(
                    field,
                    FieldCode::TooBig,
                    "Email must be at most 254 characters",
                );
                None
            }
            Err(EmailError::Invalid) => {
                self.error(field, FieldCode::InvalidString, "Invalid email");
                None
            }
        }
    }

    pub fn opt_bool(&mut self, field: &str) -> Option<bool> {
        let v = self.present(field)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.wrong_type(field, "boolean", v);
                None
            }
        }
    }

    /// A required string, trimmed, of 1 to `max` characters.
    pub fn string(&mut self, field: &str, max: usize) -> Option<String> {
        let v = self.required(field)?;
        self.check_string(field, v, max)
    }

    /// An optional string, trimmed, of 1 to `max` characters.
    pub fn opt_string(&mut self, field: &str, max: usize) -> Option<String> {
        let v = self.present(field)?;
        self.check_string(field, v, max)
    }

    /// An optional email address.
    pub fn opt_email(&mut self, field: &str) -> Option<EmailAddress> {
        self.present(field)?;
        self.email(field)
    }

    /// An optional string that must be one of `allowed`.
    pub fn opt_enum(&mut self, field: &str, allowed: &[&str]) -> Option<String> {
        let v = self.present(field)?;
        match v.as_str() {
            Some(s) if allowed.contains(&s) => Some(s.to_owned()),
            Some(_) => {
                let list = allowed
                    .iter()
                    .map(|a| format!("'{a}'"))
                    .collect::<Vec<_>>()
                    .join(" | ");
                self.error(
                    field,
                    FieldCode::InvalidEnumValue,
                    format!("Expected {list}"),
                );
                None
            }
            None => {
                self.wrong_type(field, "string", v);
                None
            }
        }
    }

    /// The raw value of an optional field, for shapes parsed elsewhere.
    pub fn raw(&self, field: &str) -> Option<&'a Value> {
        self.present(field)
    }

    /// Adds errors found by a parser of a nested value (a filter, ...).
    pub fn extend(&mut self, errors: Vec<FieldError>) {
        self.errors.extend(errors);
    }

    fn check_string(&mut self, field: &str, v: &Value, max: usize) -> Option<String> {
        let Some(s) = v.as_str() else {
            self.wrong_type(field, "string", v);
            return None;
        };
        let s = s.trim();
        if s.is_empty() {
            self.error(
                field,
                FieldCode::TooSmall,
                "String must contain at least 1 character(s)",
            );
            return None;
        }
        if s.chars().count() > max {
            self.error(
                field,
                FieldCode::TooBig,
                format!("String must contain at most {max} character(s)"),
            );
            return None;
        }
        Some(s.to_owned())
    }

    /// An optional JSON object whose serialised size is at most `max_bytes`.
    pub fn opt_object(&mut self, field: &str, max_bytes: usize) -> Option<DataMap> {
        let v = self.present(field)?;
        let Some(obj) = v.as_object() else {
            self.wrong_type(field, "object", v);
            return None;
        };
        let size = serde_json::to_vec(obj).map_or(usize::MAX, |b| b.len());
        if size > max_bytes {
            self.error(
                field,
                FieldCode::TooBig,
                format!("{field} must be at most {max_bytes} bytes of JSON"),
            );
            return None;
        }
        Some(obj.clone())
    }

    /// Ok when no field failed; otherwise the 422 with every failure.
    pub fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Error::Validation(self.errors).into())
        }
    }
}

/// An object whose serialised size is at most `max_bytes` (contact data, event data).
pub fn data_within(field: &str, data: &DataMap, max_bytes: usize) -> Result<(), ApiError> {
    let size = serde_json::to_vec(data).map_or(usize::MAX, |b| b.len());
    if size > max_bytes {
        return Err(Error::field(
            field,
            FieldCode::TooBig,
            format!("{field} must be at most {max_bytes} bytes of JSON"),
        )
        .into());
    }
    Ok(())
}

/// Query-string parameters. A query string that does not parse is a 400.
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        serde_urlencoded::from_str(raw)
            .map(Query)
            .map_err(|e| ApiError::BadRequest(format!("The query string could not be parsed: {e}")))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(_) => {
                Err(Error::field(name, FieldCode::InvalidType, "Expected true or false").into())
            }
        }
    }

    /// An optional parameter that `parse` must accept; a 422 lists `expected` otherwise.
    pub fn opt_enum<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ApiError> {
        match self.get(name).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => parse(s).map(Some).ok_or_else(|| {
                Error::field(
                    name,
                    FieldCode::InvalidEnumValue,
                    format!("Expected {expected}"),
                )
                .into()
            }),
        }
    }

    pub fn page(&self) -> Result<mailroom_actors::model::PageRequest, ApiError> {
        Ok(mailroom_actors::model::PageRequest::parse(
            self.get("limit"),
            self.get("cursor"),
        )?)
    }
}

/// Parses an id from the path; an id that cannot exist is answered as not found.
pub fn path_id<T: std::str::FromStr>(
    raw: &str,
    resource: mailroom_actors::Resource,
) -> Result<T, ApiError> {
    raw.parse().map_err(|_| Error::NotFound(resource).into())
}
