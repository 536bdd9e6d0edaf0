//! The stylesheet and the script, embedded in the binary and served under a name that
//! carries a hash of their content, so they can be cached for good.

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use sha2::{Digest, Sha256};

use super::error::PageError;

const CSS: &str = include_str!("static/app.css");
const JS: &str = include_str!("static/app.js");

fn named(stem: &str, ext: &str, content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("{stem}-{hash}.{ext}")
}

fn css_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| named("app", "css", CSS))
}

fn js_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| named("app", "js", JS))
}

pub fn css_path() -> String {
    format!("/app/static/{}", css_name())
}

pub fn js_path() -> String {
    format!("/app/static/{}", js_name())
}

pub async fn serve(name: web::Path<String>) -> Result<HttpResponse, PageError> {
    let (content, kind) = if name.as_str() == css_name() {
        (CSS, "text/css; charset=utf-8")
    } else if name.as_str() == js_name() {
        (JS, "text/javascript; charset=utf-8")
    } else {
        return Err(PageError::NotFound);
    };
    Ok(HttpResponse::Ok()
        .content_type(kind)
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(content))
}
