//! Bearer tokens from the fuzzer's bytes, whole and as a JWT's claims under a real header and
//! signature: none panics, and none is taken (no token the fuzzer makes is signed by the key).
#![no_main]

use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ifmatch_azure::identity::Identity;
use ifmatch_azure::token::DevIssuer;
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = include_bytes!("../../crates/ifmatch-azure/src/token/test-ec.pem");

fuzz_target!(|data: &[u8]| {
    let issuer = DevIssuer::from_pem(KEY).unwrap();
    let identity = Identity::new().trusting(issuer.issuer());
    let audiences = ["https://storage.azure.com".to_owned()];
    let now = SystemTime::now();
    let check = |token: &str| identity.verify(token, &audiences, "devstoreaccount1", now);
    let text = String::from_utf8_lossy(data);
    assert!(check(&text).is_err());
    // The fuzzer's bytes as the claims, and as the header, of a token the issuer signed.
    let real = issuer.mint("p", &audiences[0], Vec::new(), now, std::time::Duration::from_secs(60));
    let parts: Vec<&str> = real.split('.').collect();
    let encoded = URL_SAFE_NO_PAD.encode(data);
    assert!(check(&format!("{}.{encoded}.{}", parts[0], parts[2])).is_err());
    assert!(check(&format!("{encoded}.{}.{}", parts[1], parts[2])).is_err());
});
