//! The frame of every page: the stylesheet, the script, the header with the project and
//! the sign-out button, the navigation, and the page's own content in `main`.

use actix_web::HttpResponse;
use maud::{html, Markup, DOCTYPE};

use super::assets;
use super::auth::Signed;

/// The pages in the navigation: (path, label).
const NAV: &[(&str, &str)] = &[
    ("/app/overview", "Overview"),
    ("/app/contacts", "Contacts"),
    ("/app/segments", "Segments"),
    ("/app/templates", "Templates"),
    ("/app/campaigns", "Campaigns"),
    ("/app/workflows", "Workflows"),
    ("/app/events", "Events"),
    ("/app/domains", "Domains"),
    ("/app/webhooks", "Webhooks"),
    ("/app/suppressions", "Suppressions"),
    ("/app/settings", "Settings"),
];

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Mailroom" }
            link rel="stylesheet" href=(assets::css_path());
            script src=(assets::js_path()) defer {}
        }
    }
}

/// A page outside the signed-in frame (sign-in, errors).
pub fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body.bare {
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A hidden field with the session's CSRF token, for every form.
pub fn csrf(signed: &Signed) -> Markup {
    html! { input type="hidden" name="csrf" value=(signed.csrf); }
}

/// A signed-in page; `current` is its path in the navigation.
pub fn page(signed: &Signed, current: &str, title: &str, body: Markup) -> HttpResponse {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    span.brand { "Mailroom" }
                    span.project {
                        "Project: " strong data-project=(signed.project) { (signed.project_name) }
                        @if signed.admin { " " a href="/app/projects" { "(switch)" } }
                    }
                    form method="post" action="/app/sign-out" {
                        (csrf(signed))
                        button type="submit" { "Sign out" }
                    }
                }
                nav aria-label="Main" {
                    ul {
                        @for (path, label) in NAV {
                            li {
                                @if *path == current {
                                    a href=(path) aria-current="page" { (label) }
                                } @else {
                                    a href=(path) { (label) }
                                }
                            }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    html_response(markup)
}

pub fn html_response(markup: Markup) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string())
}
