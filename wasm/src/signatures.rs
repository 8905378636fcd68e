//! Token signatures checked by WebCrypto (`crypto.subtle`): the platform's own cryptography,
//! which costs the Worker no code. Its checks are asynchronous while a front judges a
//! request's credentials synchronously, so the Worker checks the signature of the token a
//! request carries before the front reads it ([`WebCrypto::check_ahead`]), and answers the
//! front ([`Signatures::verified`]) for the signatures checked so: remembered per isolate by
//! their fingerprint (algorithm, key, signed text and signature), 1,000 at most. What a token
//! claims is judged by the front, by the same code as natively (`ifmatch_azure::token`).

use std::collections::HashSet;
use std::sync::Mutex;

use ifmatch_azure::identity::Identity;
use ifmatch_azure::signature::{Algorithm, Signatures, Signed};
use ifmatch_azure::token;
use serde_json::{Value as Json, json};
use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::wasm_bindgen;
use worker::js_sys::{self, Promise};
use worker::wasm_bindgen_futures::JsFuture;

/// How many checked signatures an isolate remembers (then forgets them all at once: a token
/// is checked again).
const REMEMBERED: usize = 1_000;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = importKey, catch)]
    fn import_key(
        format: &str,
        key: &JsValue,
        algorithm: &JsValue,
        extractable: bool,
        usages: &JsValue,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = verify, catch)]
    fn subtle_verify(
        algorithm: &JsValue,
        key: &JsValue,
        signature: &[u8],
        data: &[u8],
    ) -> Result<Promise, JsValue>;
}

/// The signatures this isolate checked with WebCrypto.
#[derive(Debug, Default)]
pub struct WebCrypto {
    checked: Mutex<HashSet<[u8; 32]>>,
}

impl Signatures for WebCrypto {
    fn verified(&self, signed: &Signed) -> bool {
        let checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        checked.contains(&signed.fingerprint())
    }
}

impl WebCrypto {
    /// Checks the signature of the token `authorization` carries, if it carries one that a
    /// key of `identity`'s issuers would sign; remembers it if it holds. Any other token is
    /// left to the front, which refuses it with its reason.
    pub async fn check_ahead(&self, identity: &Identity, authorization: &str) {
        let Some(signed) = token::carried(authorization).and_then(|t| identity.signed(&t).ok())
        else {
            return;
        };
        let fingerprint = signed.fingerprint();
        if self.verified(&signed) {
            return;
        }
        match verify(&signed).await {
            Ok(true) => {
                let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
                if checked.len() >= REMEMBERED {
                    checked.clear();
                }
                checked.insert(fingerprint);
            }
            Ok(false) => {}
            Err(error) => worker::console_warn!("a token's signature not checked: {error:?}"),
        }
    }
}

/// Whether `signed` holds, by WebCrypto.
async fn verify(signed: &Signed) -> Result<bool, JsValue> {
    let hash = format!("SHA-{}", signed.alg.hash_bits());
    let key = &signed.key;
    // Only what names the key: WebCrypto refuses a JWK whose `alg`, `use` or `key_ops` it
    // reads otherwise than the algorithm asked for.
    let (jwk, import, check) = match signed.alg {
        Algorithm::ES256 | Algorithm::ES384 => (
            json!({ "kty": "EC", "crv": key["crv"], "x": key["x"], "y": key["y"] }),
            json!({ "name": "ECDSA", "namedCurve": key["crv"] }),
            json!({ "name": "ECDSA", "hash": hash }),
        ),
        Algorithm::PS256 | Algorithm::PS384 | Algorithm::PS512 => (
            json!({ "kty": "RSA", "n": key["n"], "e": key["e"] }),
            json!({ "name": "RSA-PSS", "hash": hash }),
            // JWS's PS algorithms salt with as many bytes as their hash gives.
            json!({ "name": "RSA-PSS", "saltLength": signed.alg.hash_bits() / 8 }),
        ),
        _ => (
            json!({ "kty": "RSA", "n": key["n"], "e": key["e"] }),
            json!({ "name": "RSASSA-PKCS1-v1_5", "hash": hash }),
            json!({ "name": "RSASSA-PKCS1-v1_5" }),
        ),
    };
    let usages = js(&json!(["verify"]))?;
    let imported = import_key("jwk", &js(&jwk)?, &js(&import)?, false, &usages)?;
    let imported = JsFuture::from(imported).await?;
    let holds = subtle_verify(
        &js(&check)?,
        &imported,
        &signed.signature,
        signed.input.as_bytes(),
    )?;
    Ok(JsFuture::from(holds).await?.as_bool() == Some(true))
}

/// `value` as a JavaScript object.
fn js(value: &Json) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(&value.to_string())
}
