//! Free-form contact data: a JSON object whose values may be anything. Updates merge
//! shallowly, and a key set to `null` is removed.

use serde_json::{Map, Value};

pub type DataMap = Map<String, Value>;

/// A field's JSON is at most `max_bytes` when written out, or the 422 entry that says so.
pub fn json_within(
    field: &str,
    value: &impl serde::Serialize,
    max_bytes: usize,
) -> Result<(), crate::FieldError> {
    let size = serde_json::to_vec(value).map_or(usize::MAX, |b| b.len());
    if size > max_bytes {
        return Err(crate::FieldError::new(
            field,
            crate::FieldCode::TooBig,
            format!("{field} must be at most {max_bytes} bytes of JSON"),
        ));
    }
    Ok(())
}

/// The `data` of an upsert or PATCH: keys to set, and keys (given as `null`) to remove.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataPatch(DataMap);

impl DataPatch {
    pub fn new(map: DataMap) -> Self {
        DataPatch(map)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The patch without its removals (`null` values): what a caller that may add and
    /// change keys, but not delete them, applies.
    pub fn without_removals(self) -> Self {
        let mut map = self.0;
        map.retain(|_, v| !v.is_null());
        DataPatch(map)
    }

    /// Applies the patch and says whether anything changed.
    pub fn apply(&self, target: &mut DataMap) -> bool {
        let mut changed = false;
        for (k, v) in &self.0 {
            if v.is_null() {
                changed |= target.remove(k).is_some();
            } else if target.get(k) != Some(v) {
                target.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_is_shallow_and_null_removes_a_key() {
        let mut target = json!({"plan": "free", "name": "Ada", "nested": {"a": 1}})
            .as_object()
            .cloned()
            .unwrap();
        let patch = DataPatch::new(
            json!({"plan": "pro", "name": null, "nested": {"b": 2}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert!(patch.apply(&mut target));
        assert_eq!(
            Value::Object(target.clone()),
            json!({"plan": "pro", "nested": {"b": 2}})
        );
        assert!(!patch.apply(&mut target), "applying twice changes nothing");
    }
}
