//! Checks that come after parsing: the field errors of parts read element by element,
//! a bound on JSON data, the query string, and ids in paths.

use mailroom_actors::model::data::json_within;
use mailroom_actors::model::DataMap;
use mailroom_actors::{Error, FieldCode, FieldError};
use serde_json::Value;

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

/// The field errors of a request whose parts are checked element by element after
/// parsing (/v1/send's recipients, headers and attachments), so that one 422 lists them all.
pub struct Fields {
    errors: Vec<FieldError>,
}

impl Fields {
    /// The body must be a JSON object.
    pub fn of(body: &Value) -> Result<Self, ApiError> {
        match body {
            Value::Object(_) => Ok(Fields { errors: Vec::new() }),
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

    /// Adds errors found by another parser (serde's, a filter's, ...).
    pub fn extend(&mut self, errors: Vec<FieldError>) {
        self.errors.extend(errors);
    }

    /// Adds the field errors of a 422 found by a check of its own.
    pub fn extend_api(&mut self, e: ApiError) {
        if let ApiError::Engine(Error::Validation(errors)) = e {
            self.errors.extend(errors);
        }
    }

    /// Ok when no field failed; otherwise the 422 with every failure.
    pub fn finish(self) -> Result<(), ApiError> {
        reject_any(self.errors)
    }
}

/// An object whose serialised size is at most `max_bytes` (contact data, event data).
pub fn data_within(field: &str, data: &DataMap, max_bytes: usize) -> Result<(), ApiError> {
    json_within(field, data, max_bytes).map_err(|e| Error::Validation(vec![e]).into())
}

/// Ok when nothing failed; otherwise the 422 with every failure.
pub fn reject_any(errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Validation(errors).into())
    }
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
