//! The `{success: true, data}` envelope of /v1/*, /campaigns and /emails answers.

use actix_web::HttpResponse;
use serde::Serialize;
use serde_json::json;

pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(json!({"success": true, "data": data}))
}
