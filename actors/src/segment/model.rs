//! The segment record: DYNAMIC (a filter) or STATIC (members added by email).

use serde::{Deserialize, Serialize};

use super::eval::Compiled;
use super::filter::Group;
use crate::error::{Error, Result};
use crate::model::{SegmentId, Timestamp};

/// On the wire DYNAMIC or STATIC, lowercase accepted (the store keeps the variant's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SegmentKind {
    #[serde(alias = "dynamic", alias = "Dynamic")]
    Dynamic,
    #[serde(alias = "static", alias = "Static")]
    Static,
}

impl SegmentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentKind::Dynamic => "DYNAMIC",
            SegmentKind::Static => "STATIC",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub id: SegmentId,
    pub name: String,
    pub description: Option<String>,
    pub kind: SegmentKind,
    /// Some for DYNAMIC segments, None for STATIC ones.
    pub filters: Option<Group>,
    pub track_membership: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The filter is kept in its canonical JSON text (bincode cannot hold free JSON).
#[derive(Serialize, Deserialize)]
struct Stored {
    id: SegmentId,
    name: String,
    description: Option<String>,
    kind: SegmentKind,
    filters: Option<String>,
    track_membership: bool,
    created_at: i64,
    updated_at: i64,
}

/// The name lowercased, every run of characters that are not letters or digits turned
/// into one `-`, and no `-` at either end (API.md 14.4): `"Pro Users!"` is `pro-users`.
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for ch in name.chars() {
        if ch.is_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.extend(ch.to_lowercase());
        } else {
            dash = true;
        }
    }
    out
}

impl Segment {
    pub fn slug(&self) -> String {
        slug(&self.name)
    }

    /// The evaluator of a DYNAMIC segment.
    pub fn compiled(&self) -> Option<Compiled> {
        self.filters.as_ref().map(Compiled::new)
    }

    /// The name of the membership event (`segment.<slug>.entry` or `.exit`).
    pub fn event_name(&self, entry: bool) -> String {
        format!(
            "segment.{}.{}",
            self.slug(),
            if entry { "entry" } else { "exit" }
        )
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::store::codec::encode(&Stored {
            id: self.id,
            name: self.name.clone(),
            description: self.description.clone(),
            kind: self.kind,
            filters: self.filters.as_ref().map(|g| g.to_json().to_string()),
            track_membership: self.track_membership,
            created_at: self.created_at.millis(),
            updated_at: self.updated_at.millis(),
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::store::codec::decode(bytes)?;
        let filters = match s.filters {
            None => None,
            Some(text) => {
                let v: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| Error::storage_caused("stored segment filter", e))?;
                Some(Group::parse(&v, "filters").map_err(|_| {
                    Error::storage(format!("stored segment {} has an invalid filter", s.id))
                })?)
            }
        };
        Ok(Segment {
            id: s.id,
            name: s.name,
            description: s.description,
            kind: s.kind,
            filters,
            track_membership: s.track_membership,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_contract() {
        assert_eq!(slug("Pro Users!"), "pro-users");
        assert_eq!(slug("  --Trial -- ending__soon "), "trial-ending-soon");
        assert_eq!(slug("Ünïcode Fans 2"), "ünïcode-fans-2");
        assert_eq!(slug("!!!"), "");
    }

    #[test]
    fn a_segment_round_trips_through_the_store_form() {
        let g = Group::parse(
            &serde_json::json!({"operator": "AND", "conditions": [{"field": "data.plan", "operator": "equals", "value": "pro"}]}),
            "filters",
        )
        .unwrap();
        let s = Segment {
            id: SegmentId::new(),
            name: "Pro".into(),
            description: Some("paying".into()),
            kind: SegmentKind::Dynamic,
            filters: Some(g),
            track_membership: true,
            created_at: 1.into(),
            updated_at: 2.into(),
        };
        assert_eq!(Segment::decode(&s.encode().unwrap()).unwrap(), s);
        assert_eq!(s.event_name(true), "segment.pro.entry");
    }
}
