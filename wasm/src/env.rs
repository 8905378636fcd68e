//! The Workers clock and randomness: `Date.now()` and `crypto.randomUUID()`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasm_bindgen::prelude::wasm_bindgen;

/// The Workers clock and randomness.
#[derive(Debug, Clone, Copy)]
pub struct WorkersEnv;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = randomUUID)]
    pub(crate) fn random_uuid() -> String;
}

impl ifmatch_azure::Env for WorkersEnv {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(worker::Date::now().as_millis())
    }

    fn random_uuid(&self) -> uuid::Uuid {
        // crypto.randomUUID() is a version 4 UUID from a cryptographic generator.
        uuid::Uuid::parse_str(&random_uuid()).expect("crypto.randomUUID() answers a UUID")
    }
}
