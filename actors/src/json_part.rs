//! Parts of a request that a parser of their own checks after deserializing (a filter,
//! a workflow's steps, /v1/send's recipients): deserializing only takes the JSON, so that
//! the parser names every problem by its path, and the type carries the part's JSON
//! Schema, which the API document carries as written.

/// A part of a request that its own checker reads after parsing, element by element, so
/// that every error names its element (`to[2].email`, `headers.From`): parsing only takes
/// the JSON, and the type carries the part's schema.
#[macro_export]
macro_rules! json_part {
    ($(#[$doc:meta])* $name:ident, $schema_name:literal, $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub serde_json::Value);

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                serde_json::Value::deserialize(d).map($name)
            }
        }

        impl $name {
            /// The schema as JSON, which `/openapi.json` carries as it is (see
            /// `exact` in the server's `openapi.rs`).
            pub fn json_schema() -> serde_json::Value {
                $schema
            }
        }

        /// A stand-in: the document replaces it with `json_schema()`.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::default())
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed($schema_name)
            }
        }
    };
}
