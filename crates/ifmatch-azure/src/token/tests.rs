//! Tokens of every kind a client may send, good and bad, each refused as its fault says.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::*;
use crate::identity::{DEV_TENANT, dev_issuer};
use crate::signature::{NativeSignatures, Signatures};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{EncodingKey, Header};

const STORAGE: &str = "https://storage.azure.com";
const READ: &str = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read";

fn dev() -> DevIssuer {
    DevIssuer::from_pem(include_bytes!("test-ec.pem")).unwrap()
}

fn identity() -> Identity {
    Identity::new().trusting(dev().issuer())
}

fn reader() -> Vec<Carried> {
    vec![Carried {
        role: "Storage Blob Data Reader".into(),
        scope: "/".into(),
    }]
}

fn check(token: &str, now: SystemTime) -> Result<Access, TokenError> {
    identity().verify(token, &[STORAGE.into()], "devstoreaccount1", now)
}

/// A token with `claims` under `header`, signed by `key` as `alg`.
fn signed(header: serde_json::Value, claims: serde_json::Value, key: &EncodingKey) -> String {
    let header: Header = serde_json::from_value(header).unwrap();
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

fn claims(now: SystemTime) -> serde_json::Value {
    let now = unix(now);
    serde_json::json!({
        "iss": dev_issuer(), "aud": STORAGE, "exp": now + 3600, "nbf": now,
        "tid": DEV_TENANT, "oid": "p", "ifmatch_roles": [{"role": "Storage Blob Data Reader", "scope": "/"}],
    })
}

/// `token` with richer claims (an Owner's) under its own signature: a forgery.
fn richer(token: &str, now: SystemTime) -> String {
    let (head, rest) = token.split_once('.').unwrap();
    let (_, signature) = rest.split_once('.').unwrap();
    let mut richer = claims(now);
    richer["ifmatch_roles"] =
        serde_json::json!([{"role": "Storage Blob Data Owner", "scope": "/"}]);
    let claims = URL_SAFE_NO_PAD.encode(richer.to_string());
    format!("{head}.{claims}.{signature}")
}

fn kid() -> String {
    dev().public()["kid"].as_str().unwrap().to_owned()
}

#[test]
fn a_development_token_is_taken_with_the_roles_it_carries() {
    let now = SystemTime::now();
    let token = dev().mint("p", STORAGE, reader(), now, Duration::from_secs(3600));
    let access = check(&token, now).unwrap();
    assert_eq!(access.principal, "p");
    assert!(access.allows(&[READ], "/blobServices/default/containers/box"));
    assert!(!access.allows(&[&READ.replace("read", "write")], "/"));
    // The audience may carry a trailing slash, and the account's own is taken.
    let slash = dev().mint(
        "p",
        "https://storage.azure.com/",
        reader(),
        now,
        Duration::from_secs(60),
    );
    assert!(check(&slash, now).is_ok());
    let own = dev().mint(
        "p",
        "https://acct.blob.core.windows.net",
        vec![],
        now,
        Duration::from_secs(60),
    );
    let audiences = ["https://acct.blob.core.windows.net".to_owned()];
    assert!(identity().verify(&own, &audiences, "acct", now).is_ok());
}

#[test]
fn a_token_outside_its_lifetime_is_refused_past_the_skew() {
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let token = dev().mint("p", STORAGE, reader(), now, hour);
    // Within five minutes past expiry: taken, as Azure takes it.
    assert!(check(&token, now + hour + SKEW).is_ok());
    let late = check(&token, now + hour + SKEW + Duration::from_secs(1));
    assert!(matches!(late, Err(TokenError::Lifetime(_))), "{late:?}");
    assert!(late.unwrap_err().to_string().contains("expired"));
    let early = check(&token, now - SKEW - Duration::from_secs(1));
    assert!(matches!(early, Err(TokenError::Lifetime(_))), "{early:?}");
    let mut no_exp = claims(now);
    no_exp.as_object_mut().unwrap().remove("exp");
    let key = EncodingKey::from_ec_pem(include_bytes!("test-ec.pem")).unwrap();
    let token = signed(
        serde_json::json!({"alg": "ES256", "kid": kid()}),
        no_exp,
        &key,
    );
    assert!(matches!(check(&token, now), Err(TokenError::Lifetime(_))));
}

#[test]
fn each_claim_that_is_not_the_servers_is_refused_by_name() {
    let now = SystemTime::now();
    let key = EncodingKey::from_ec_pem(include_bytes!("test-ec.pem")).unwrap();
    let header = serde_json::json!({"alg": "ES256", "kid": kid()});
    let with = |name: &str, value: serde_json::Value| {
        let mut claims = claims(now);
        claims[name] = value;
        signed(header.clone(), claims, &key)
    };
    let wrong_audience = check(&with("aud", "https://vault.azure.net".into()), now);
    assert!(
        matches!(wrong_audience, Err(TokenError::Audience(_))),
        "{wrong_audience:?}"
    );
    let audiences = check(&with("aud", serde_json::json!(["x", STORAGE])), now);
    assert!(audiences.is_ok(), "{audiences:?}");
    let issuer = check(&with("iss", "https://sts.windows.net/other/".into()), now);
    assert!(matches!(issuer, Err(TokenError::Issuer(_))), "{issuer:?}");
    let tenant = check(&with("tid", "another".into()), now);
    assert!(matches!(tenant, Err(TokenError::Tenant(_))), "{tenant:?}");
    let mut nobody = claims(now);
    nobody.as_object_mut().unwrap().remove("oid");
    let nobody = check(&signed(header.clone(), nobody, &key), now);
    assert_eq!(nobody.unwrap_err(), TokenError::NoPrincipal);
}

#[test]
fn forged_unsigned_and_symmetric_tokens_are_refused() {
    let now = SystemTime::now();
    let token = dev().mint("p", STORAGE, reader(), now, Duration::from_secs(3600));
    let (_, signature) = token.rsplit_once('.').unwrap();
    assert_eq!(
        check(&richer(&token, now), now).unwrap_err(),
        TokenError::Signature
    );
    // Signed by another key that claims the server's key id.
    let other = EncodingKey::from_ec_pem(include_bytes!("test-ec-other.pem")).unwrap();
    let header = serde_json::json!({"alg": "ES256", "kid": kid()});
    let impostor = signed(header, claims(now), &other);
    assert_eq!(check(&impostor, now).unwrap_err(), TokenError::Signature);
    // Signed by a key no issuer has.
    let unknown = signed(
        serde_json::json!({"alg": "ES256", "kid": "k2"}),
        claims(now),
        &other,
    );
    assert!(matches!(
        check(&unknown, now),
        Err(TokenError::UnknownKey(_))
    ));
    // `alg: none`, with or without a signature.
    let none = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"none","kid":"{}"}}"#, kid()));
    let body = URL_SAFE_NO_PAD.encode(claims(now).to_string());
    for unsigned in [
        format!("{none}.{body}."),
        format!("{none}.{body}.{signature}"),
    ] {
        assert!(check(&unsigned, now).is_err(), "{unsigned}");
    }
    // HMAC with the public key's text as the secret.
    let public = serde_json::to_string(dev().public()).unwrap();
    let secret = EncodingKey::from_secret(public.as_bytes());
    let hmac = signed(
        serde_json::json!({"alg": "HS256", "kid": kid()}),
        claims(now),
        &secret,
    );
    assert!(matches!(check(&hmac, now), Err(TokenError::Algorithm(_))));
}

#[test]
fn malformed_and_oversized_tokens_are_refused_without_a_panic() {
    let now = SystemTime::now();
    let huge = "a".repeat(MAX_TOKEN + 1);
    assert_eq!(
        check(&huge, now).unwrap_err(),
        TokenError::TooLarge(MAX_TOKEN + 1)
    );
    let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"ES256","kid":"{}"}}"#, kid()));
    for bad in [
        String::new(),
        "x".into(),
        "a.b".into(),
        "a.b.c.d".into(),
        "!!!.???.***".into(),
        format!("{header}.not-json.sig"),
        format!("{header}.{}.", URL_SAFE_NO_PAD.encode("[]")),
        format!("{}.e30.", URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256"}"#)),
        format!("{}.e30.", URL_SAFE_NO_PAD.encode("\u{0}")),
        // What a JWS parser of its own must refuse: an algorithm or key id of another type,
        // a signature that is no base64url, a part too many or too few.
        format!("{}.e30.", URL_SAFE_NO_PAD.encode(r#"{"alg":7,"kid":"k"}"#)),
        format!(
            "{}.e30.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","kid":[1]}"#)
        ),
        format!("{header}.e30.!!!"),
        format!("{header}.e30.=="),
        format!("{header}.e30"),
        format!("{header}..."),
        format!(".{header}.e30."),
    ] {
        let refused = check(&bad, now);
        assert!(refused.is_err(), "{bad:?} was taken");
        assert!(!refused.unwrap_err().to_string().is_empty());
    }
}

#[test]
fn a_configured_issuers_rs256_tokens_are_judged_by_the_files_assignments_alone() {
    let now = SystemTime::now();
    let key = EncodingKey::from_rsa_pem(include_bytes!("test-rsa.pem")).unwrap();
    let mut public = Jwk::from_encoding_key(&key, jsonwebtoken::Algorithm::RS256).unwrap();
    public.common.key_id = Some("entra-1".into());
    let keys = serde_json::json!({"keys": [public]}).to_string();
    let config = r#"{
        "issuers": [{"issuer": "https://sts.windows.net/t/", "tenant": "t", "jwks": "keys.json"}],
        "assignments": [{"principal": "app", "role": "Storage Blob Data Reader", "scope": "/blobServices/default/containers/box"}]
    }"#;
    let identity = Identity::from_config(config, |_| Ok(keys.clone())).unwrap();
    let mut claims = claims(now);
    claims["iss"] = "https://sts.windows.net/t/".into();
    claims["tid"] = "t".into();
    claims["oid"] = "app".into();
    // Roles it claims for itself count for nothing: only the development issuer's do.
    claims["ifmatch_roles"] =
        serde_json::json!([{"role": "Storage Blob Data Owner", "scope": "/"}]);
    let token = signed(
        serde_json::json!({"alg": "RS256", "kid": "entra-1"}),
        claims,
        &key,
    );
    let access = identity
        .verify(&token, &[STORAGE.into()], "devstoreaccount1", now)
        .unwrap();
    assert!(access.allows(&[READ], "/blobServices/default/containers/box/blobs/a"));
    assert!(!access.allows(&[READ], "/blobServices/default/containers/other"));
    let delete = READ.replace("read", "delete");
    assert!(!access.allows(&[&delete], "/blobServices/default/containers/box"));
    // The development issuer is not trusted by this identity.
    let dev_token = dev().mint("app", STORAGE, reader(), now, Duration::from_secs(60));
    let refused = identity.verify(&dev_token, &[STORAGE.into()], "devstoreaccount1", now);
    assert!(matches!(refused, Err(TokenError::UnknownKey(_))));
}

/// A host whose cryptography is asynchronous (the Worker's WebCrypto): it checks a token's
/// signature ahead ([`Identity::signed`]) and answers for those it checked.
#[derive(Debug, Default)]
struct Ahead(Mutex<HashSet<[u8; 32]>>);

impl Signatures for Ahead {
    fn verified(&self, signed: &Signed) -> bool {
        self.0.lock().unwrap().contains(&signed.fingerprint())
    }
}

#[test]
fn a_host_that_checks_signatures_ahead_takes_what_it_checked_and_nothing_else() {
    let now = SystemTime::now();
    let ahead = Arc::new(Ahead::default());
    let identity = identity().with_signatures(ahead.clone());
    let token = dev().mint("p", STORAGE, reader(), now, Duration::from_secs(3600));
    let audiences = [STORAGE.to_owned()];
    let refused = identity.verify(&token, &audiences, "devstoreaccount1", now);
    assert_eq!(
        refused.unwrap_err(),
        TokenError::Signature,
        "not checked yet"
    );
    let signed = identity.signed(&token).unwrap();
    assert_eq!(signed.alg, Algorithm::ES256);
    assert!(
        NativeSignatures.verified(&signed),
        "what the host checks holds"
    );
    ahead.0.lock().unwrap().insert(signed.fingerprint());
    let access = identity.verify(&token, &audiences, "devstoreaccount1", now);
    assert!(
        access
            .unwrap()
            .allows(&[READ], "/blobServices/default/containers/c")
    );
    // Another token (the claims changed under the same signature) is not the one checked.
    let (_, rest) = token.split_once('.').unwrap();
    let forged = identity.verify(&richer(&token, now), &audiences, "devstoreaccount1", now);
    assert_eq!(forged.unwrap_err(), TokenError::Signature);
    // A key of another kind than the header's algorithm says is refused before any check.
    let rsa_header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"RS256","kid":"{}"}}"#, kid()));
    let mismatched = format!("{rsa_header}.{}", rest);
    assert!(matches!(
        identity.signed(&mismatched),
        Err(TokenError::Algorithm(_))
    ));
}

#[test]
fn the_token_a_header_carries_is_found_in_each_services_form() {
    assert_eq!(
        carried("Bearer abc.def.ghi ").as_deref(),
        Some("abc.def.ghi")
    );
    let cosmos = "type%3Daad%26ver%3D1.0%26sig%3Dabc.def.ghi";
    assert_eq!(carried(cosmos).as_deref(), Some("abc.def.ghi"));
    for none in [
        "SharedKey devstoreaccount1:c2ln",
        "type%3Dmaster%26ver%3D1.0%26sig%3Dc2ln",
        "type=resource&ver=1.0&sig=abc",
        "bearer",
        "",
    ] {
        assert_eq!(carried(none), None, "{none}");
    }
}

#[test]
fn every_algorithm_taken_is_checked_natively_against_another_librarys_signatures() {
    use crate::signature::{Algorithm, Signed};
    use jsonwebtoken::Algorithm as J;
    let rsa = EncodingKey::from_rsa_pem(include_bytes!("test-rsa.pem")).unwrap();
    let p256 = EncodingKey::from_ec_pem(include_bytes!("test-ec.pem")).unwrap();
    let p384 = EncodingKey::from_ec_pem(include_bytes!("test-ec384.pem")).unwrap();
    let cases = [
        (Algorithm::RS256, J::RS256, &rsa),
        (Algorithm::RS384, J::RS384, &rsa),
        (Algorithm::RS512, J::RS512, &rsa),
        (Algorithm::PS256, J::PS256, &rsa),
        (Algorithm::PS384, J::PS384, &rsa),
        (Algorithm::PS512, J::PS512, &rsa),
        (Algorithm::ES256, J::ES256, &p256),
        (Algorithm::ES384, J::ES384, &p384),
    ];
    let input = "eyJhbGciOiJ4In0.eyJzdWIiOiJwIn0";
    for (alg, theirs, key) in cases {
        let public = serde_json::to_value(Jwk::from_encoding_key(key, theirs).unwrap()).unwrap();
        let signature = jsonwebtoken::crypto::sign(input.as_bytes(), key, theirs).unwrap();
        let signed = Signed {
            alg,
            key: public,
            input: input.into(),
            signature: URL_SAFE_NO_PAD.decode(signature).unwrap(),
        };
        assert!(NativeSignatures.verified(&signed), "{alg:?}");
        let mut other = signed.clone();
        other.input.push('x');
        assert!(
            !NativeSignatures.verified(&other),
            "{alg:?} over another text"
        );
        let mut other = signed.clone();
        other.signature[7] ^= 1;
        assert!(
            !NativeSignatures.verified(&other),
            "{alg:?} with a bit flipped"
        );
        // The same signature named by the other family's algorithm, and a key of the wrong
        // kind or curve: refused, not tried.
        let mut other = signed.clone();
        other.alg = match alg {
            Algorithm::ES256 => Algorithm::ES384,
            Algorithm::ES384 => Algorithm::RS256,
            _ => Algorithm::ES256,
        };
        assert!(
            !NativeSignatures.verified(&other),
            "{alg:?} as {:?}",
            other.alg
        );
    }
}

#[test]
fn the_development_issuers_key_is_named_by_its_rfc_7638_thumbprint() {
    let public: Jwk = serde_json::from_value(dev().public().clone()).unwrap();
    let theirs = public.thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256);
    assert_eq!(kid(), theirs);
    assert_eq!(dev().public()["alg"], "ES256");
    // A token it mints is read by another library with its public key.
    let now = SystemTime::now();
    let token = dev().mint(
        "p",
        STORAGE,
        reader(),
        now,
        std::time::Duration::from_secs(60),
    );
    let key = jsonwebtoken::DecodingKey::from_jwk(&public).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[STORAGE]);
    let read = jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation).unwrap();
    assert_eq!(read.claims["oid"], "p");
    assert_eq!(read.header.kid.as_deref(), Some(kid().as_str()));
}
