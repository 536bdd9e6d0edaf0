//! Cursor pagination shared by every list: newest first, and a cursor that stays valid
//! while records are inserted or deleted (it is the id of the last record returned).

use crate::error::{Error, FieldCode};

pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    limit: usize,
    cursor: Option<String>,
}

impl PageRequest {
    /// `limit` must be an integer from 1 to 100; anything else is a 422.
    pub fn parse(limit: Option<&str>, cursor: Option<&str>) -> Result<Self, Error> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(raw) => {
                let n: i64 = raw.trim().parse().map_err(|_| {
                    Error::field(
                        "limit",
                        FieldCode::InvalidType,
                        "Expected an integer from 1 to 100",
                    )
                })?;
                if n < 1 {
                    return Err(Error::field(
                        "limit",
                        FieldCode::TooSmall,
                        "limit must be at least 1",
                    ));
                }
                if n > MAX_LIMIT as i64 {
                    return Err(Error::field(
                        "limit",
                        FieldCode::TooBig,
                        "limit must be at most 100",
                    ));
                }
                n as usize
            }
        };
        let cursor = cursor.filter(|c| !c.is_empty()).map(str::to_owned);
        // A cursor is an id as the API writes it (hyphenated), nothing else.
        if cursor.as_deref().is_some_and(|c| !is_hyphenated_id(c)) {
            return Err(Error::field("cursor", FieldCode::Custom, "Invalid cursor"));
        }
        Ok(PageRequest { limit, cursor })
    }

    /// The pattern a cursor matches (for the OpenAPI document).
    pub const CURSOR_PATTERN: &'static str =
        "^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

    pub fn first(limit: usize) -> Self {
        PageRequest {
            limit: limit.clamp(1, MAX_LIMIT),
            cursor: None,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

/// One page of a list: the items, the cursor for the next page (None at the end) and
/// the number of records that match the request's filters.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
    pub total: u64,
}

impl<T> Page<T> {
    /// The page of `fetched`, read up to one past the request's limit: an item past it
    /// says there is more, and is dropped; the next cursor is then the last kept item's
    /// `id`. Every list pages through here.
    pub(crate) fn of(
        mut fetched: Vec<T>,
        request: &PageRequest,
        total: u64,
        id: impl Fn(&T) -> String,
    ) -> Page<T> {
        let has_more = fetched.len() > request.limit();
        fetched.truncate(request.limit());
        let next_cursor = if has_more {
            fetched.last().map(id)
        } else {
            None
        };
        Page {
            items: fetched,
            next_cursor,
            total,
        }
    }

    pub fn has_more(&self) -> bool {
        self.next_cursor.is_some()
    }

    /// The same page with each item turned into another (a record into its view).
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            next_cursor: self.next_cursor,
            total: self.total,
        }
    }

    /// The same page (cursor, total) around other items: what a list that turns the
    /// whole page at once (counts read in one go) answers with.
    pub fn with_items<U>(self, items: Vec<U>) -> Page<U> {
        Page {
            items,
            next_cursor: self.next_cursor,
            total: self.total,
        }
    }
}

/// `8-4-4-4-12` hex digits.
fn is_hyphenated_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_outside_one_to_a_hundred_is_refused() {
        for bad in ["0", "101", "-1", "abc", "1.5"] {
            assert!(PageRequest::parse(Some(bad), None).is_err(), "{bad}");
        }
        assert_eq!(PageRequest::parse(None, None).unwrap().limit(), 20);
        assert_eq!(
            PageRequest::parse(Some("100"), Some("")).unwrap().cursor(),
            None
        );
    }
}
