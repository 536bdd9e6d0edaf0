//! The one shape of a paged list's answer, `{<items>, cursor, hasMore, total}`: every
//! paged list of the API declares its answer with `paged_list!`, and its handler turns
//! the engine's `Page` of views into it with `From`.

/// Declares `$list { $field: Vec<$view>, cursor, hasMore, total }`, its OpenAPI schema,
/// and `From<Page<$view>>`.
macro_rules! paged_list {
    ($(#[$meta:meta])* $list:ident { $field:ident: $view:ty }) => {
        $(#[$meta])*
        #[derive(Debug, serde::Serialize, utoipa::ToSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $list {
            pub $field: Vec<$view>,
            pub cursor: Option<String>,
            pub has_more: bool,
            pub total: u64,
        }

        impl From<mailroom_actors::model::Page<$view>> for $list {
            fn from(page: mailroom_actors::model::Page<$view>) -> Self {
                $list {
                    has_more: page.has_more(),
                    $field: page.items,
                    cursor: page.next_cursor,
                    total: page.total,
                }
            }
        }
    };
}

pub(crate) use paged_list;
