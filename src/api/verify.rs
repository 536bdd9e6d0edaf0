//! The typed requests and views of the verify endpoints (handled in
//! `http/verify.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::engine::requests::{parse_address, Address, Verification};
use mailroom_actors::error::field_de_error;
use mailroom_actors::model::{EmailAddress, EmailError};
use mailroom_actors::FieldCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::wire::Text;

/// More than this is not an address (RFC 5321 allows 254 octets; IDN input is longer).
const MAX_EMAIL_INPUT: usize = 1024;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationView {
    /// The address, trimmed, with its domain lowercased.
    pub email: String,
    /// Good syntax, the domain exists, and it has MX records.
    pub valid: bool,
    pub is_disposable: bool,
    pub is_alias: bool,
    pub is_typo: bool,
    pub is_plus_addressed: bool,
    pub is_personal_email: bool,
    pub domain_exists: bool,
    pub has_website: bool,
    pub has_mx_records: bool,
    /// Each negative finding, in words.
    pub reasons: Vec<String>,
    /// The corrected address when the domain looks like a typo.
    pub suggested_email: Option<String>,
}

impl From<Verification> for VerificationView {
    fn from(v: Verification) -> Self {
        VerificationView {
            email: v.email,
            valid: v.valid,
            is_disposable: v.is_disposable,
            is_alias: v.is_alias,
            is_typo: v.is_typo,
            is_plus_addressed: v.is_plus_addressed,
            is_personal_email: v.is_personal_email,
            domain_exists: v.domain_exists,
            has_website: v.has_website,
            has_mx_records: v.has_mx_records,
            reasons: v.reasons.into_iter().map(|r| r.into_owned()).collect(),
            suggested_email: v.suggested_email,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VerifyEnvelope {
    pub success: bool,
    pub data: VerificationView,
}

/// Request body of POST /v1/verify. Anything address-shaped gets a result (the
/// verifier's own parser is more lenient than a contact's address).
#[derive(Deserialize, ToSchema)]
pub struct VerifyRequest {
    pub email: AddressShaped,
}

/// Text with an `@` and something on each side, no spaces or control characters: the
/// verifier gives such a string a result, whose reasons say what is wrong with it.
pub struct AddressShaped(pub Address);

impl<'de> Deserialize<'de> for AddressShaped {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Text::<MAX_EMAIL_INPUT>::deserialize(d)?;
        parse_address(raw.as_str()).map(AddressShaped).map_err(|_| {
            match EmailAddress::parse(raw.as_str()) {
                Err(e @ EmailError::Invalid(_)) => field_de_error(e.code(), e),
                _ => field_de_error(FieldCode::InvalidString, "Invalid email"),
            }
        })
    }
}

impl utoipa::PartialSchema for AddressShaped {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        const NOT_SPACE_AT_OR_CONTROL: &str = r"[^\s@\x00-\x1f\x7f-\x9f]";
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("Anything shaped like an address: text@text"))
            // The local part may hold an `@` too: the last one splits the address.
            .pattern(Some(format!(
                r"^\s*[^\s\x00-\x1f\x7f-\x9f]+@{NOT_SPACE_AT_OR_CONTROL}+\s*$"
            )))
            .max_length(Some(MAX_EMAIL_INPUT))
            .build()
            .into()
    }
}
impl ToSchema for AddressShaped {}
