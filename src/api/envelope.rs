//! The `{success: true, data}` envelope of /v1/*, /campaigns and /emails answers.

use actix_web::HttpResponse;
use serde::Serialize;

#[derive(Serialize)]
pub struct Envelope<T> {
    pub success: bool,
    pub data: T,
}

pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(Envelope {
        success: true,
        data,
    })
}

pub fn created<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Created().json(Envelope {
        success: true,
        data,
    })
}
