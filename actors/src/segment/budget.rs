//! What one request may spend in the filter engine (`limits.max_filter_evaluations`):
//! contacts times the conditions judged for each, counted before the walk starts. A
//! filter's cost grows with the project and with the filter, both in the tenant's hands;
//! without a bound one call could hold a core for many seconds.

use crate::error::{Error, FieldCode, FieldError, Result};

/// Ok when judging `conditions` conditions on each of `contacts` contacts stays within
/// `max`; otherwise a 422 on `field` that says what it would cost.
pub fn check(field: &str, contacts: usize, conditions: u64, max: u64) -> Result<()> {
    let cost = (contacts as u64).saturating_mul(conditions);
    if cost <= max {
        return Ok(());
    }
    Err(Error::Validation(vec![FieldError::new(
        field,
        FieldCode::TooBig,
        format!(
            "Judging {conditions} filter condition(s) on each of this project's {contacts} \
             contacts is {cost} evaluations; one request may spend at most {max}"
        ),
    )
    .suggesting(
        "Use fewer conditions (one `in` list rather than several `equals`), ask for fewer \
         segments at a time, or ask the operator to raise limits.max_filter_evaluations",
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_its_bound_and_names_the_field_past_it() {
        assert!(check("filters", 1_000, 8, 8_000).is_ok());
        match check("filters", 1_001, 8, 8_000) {
            Err(Error::Validation(e)) => {
                assert_eq!(
                    (e[0].field.as_str(), e[0].code),
                    ("filters", FieldCode::TooBig)
                );
                assert!(
                    e[0].message.contains("8008 evaluations"),
                    "{}",
                    e[0].message
                );
            }
            other => panic!("a 422: {other:?}"),
        }
        assert!(check("filters", usize::MAX, u64::MAX, u64::MAX).is_ok());
    }
}
