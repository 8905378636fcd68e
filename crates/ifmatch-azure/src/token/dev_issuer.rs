//! The development issuer (`ifmatch token`): a key of the server's own that signs tokens it
//! trusts, minted with `ring` (native hosts only: the Worker is given its public keys, never
//! the key).

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

use super::{Carried, Claims};
use crate::auth::unix;
use crate::identity::{DEV_TENANT, Issuer, dev_issuer};

/// The development issuer: a key of the server's own (a P-256 key, PKCS#8 PEM) that signs
/// tokens the server trusts, each carrying the roles it was minted with.
pub struct DevIssuer {
    key: EcdsaKeyPair,
    /// Its public key as a JWK, named (`kid`) by its thumbprint.
    public: serde_json::Value,
}

impl DevIssuer {
    /// The issuer of this private key.
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let fault = |e: &dyn std::fmt::Display| format!("the development issuer's key: {e}");
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem).map_err(|e| fault(&e))?;
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &SystemRandom::new(),
        )
        .map_err(|e| fault(&e))?;
        // The uncompressed point: 4, then x and y, 32 bytes each.
        let point = key.public_key().as_ref();
        let (x, y) = (&point[1..33], &point[33..]);
        let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
        // RFC 7638: the key's required members, in this order, without spaces.
        let members = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(members));
        let public = serde_json::json!({
            "kty": "EC", "crv": "P-256", "x": x, "y": y, "alg": "ES256", "kid": kid,
        });
        Ok(Self { key, public })
    }

    /// The trusted issuer entry of this key.
    pub fn issuer(&self) -> Issuer {
        Issuer::development(self.jwks()).expect("a key set of one key")
    }

    /// Its public key as a JSON Web Key Set: what a server that cannot read the key itself
    /// (the Worker) is given to trust it.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.public] })
    }

    /// Its public key, as a JWK.
    pub fn public(&self) -> &serde_json::Value {
        &self.public
    }

    /// A token for `principal`, for `audience`, valid from `now` for `lifetime`, carrying
    /// `roles`.
    pub fn mint(
        &self,
        principal: &str,
        audience: &str,
        roles: Vec<Carried>,
        now: SystemTime,
        lifetime: Duration,
    ) -> String {
        let now = unix(now);
        let claims = Claims {
            iss: dev_issuer(),
            aud: audience.into(),
            exp: Some(now + lifetime.as_secs() as i64),
            nbf: Some(now),
            iat: Some(now),
            tid: Some(DEV_TENANT.to_owned()),
            oid: Some(principal.to_owned()),
            sub: Some(principal.to_owned()),
            ifmatch_roles: roles,
        };
        let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "kid": self.public["kid"]});
        let claims = serde_json::to_vec(&claims).expect("claims serialize");
        let part = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let input = format!("{}.{}", part(header.to_string().as_bytes()), part(&claims));
        let signature =
            (self.key.sign(&SystemRandom::new(), input.as_bytes())).expect("a P-256 key signs");
        format!("{input}.{}", part(signature.as_ref()))
    }
}
