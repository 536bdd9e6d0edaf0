//! What the API tests share: the harness (`app`), the typed settings a test server runs
//! with (`settings`), a server with a verified sender and a real SMTP relay (`relay`),
//! campaign and mail fixtures (`campaign`), imports, metrics and the stopped store. A
//! feature's test file holds its tests; anything two files use lives here.

pub mod app;
pub mod campaign;
pub mod cluster;
pub mod imports;
pub mod metrics;
pub mod postgres;
pub mod relay;
pub mod settings;
pub mod store;
