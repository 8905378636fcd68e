//! A token's signature as the host's cryptography checks it: what is to be checked
//! ([`Signed`]: the algorithm, the trusted key, the signed text, the signature) and who checks
//! it ([`Signatures`]): `ring` natively (`NativeSignatures`, feature `tokens`), WebCrypto on
//! the Worker (which checks ahead, asynchronously, what
//! [`Identity::signed`](crate::identity::Identity::signed) names). What a token claims is
//! [`crate::token`]'s.

use std::fmt;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

/// The signature algorithms taken: asymmetric ones only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Algorithm {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
}

impl Algorithm {
    const ALL: [Self; 8] = [
        Self::RS256,
        Self::RS384,
        Self::RS512,
        Self::PS256,
        Self::PS384,
        Self::PS512,
        Self::ES256,
        Self::ES384,
    ];

    /// The algorithm a JWS header names (`alg`), if it is one taken.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Its name in a JWS header (`alg`).
    pub fn name(self) -> &'static str {
        match self {
            Self::RS256 => "RS256",
            Self::RS384 => "RS384",
            Self::RS512 => "RS512",
            Self::PS256 => "PS256",
            Self::PS384 => "PS384",
            Self::PS512 => "PS512",
            Self::ES256 => "ES256",
            Self::ES384 => "ES384",
        }
    }

    /// The SHA-2 it hashes with, in bits (256, 384, 512).
    pub fn hash_bits(self) -> u16 {
        match self {
            Self::RS256 | Self::PS256 | Self::ES256 => 256,
            Self::RS384 | Self::PS384 | Self::ES384 => 384,
            Self::RS512 | Self::PS512 => 512,
        }
    }

    /// Whether `key` (a JWK) is a key of the kind it signs with: RSA for RS and PS, the curve
    /// of its size for ES.
    pub fn fits(self, key: &Json) -> bool {
        match self {
            Self::ES256 => key["kty"] == "EC" && key["crv"] == "P-256",
            Self::ES384 => key["kty"] == "EC" && key["crv"] == "P-384",
            _ => key["kty"] == "RSA",
        }
    }
}

/// A signature to check: `signature` over `input` (a token's header and claims, as sent) by
/// `key` (a JWK of a trusted issuer, of the kind `alg` signs with).
#[derive(Debug, Clone, PartialEq)]
pub struct Signed {
    /// The algorithm.
    pub alg: Algorithm,
    /// The key, a JWK.
    pub key: Json,
    /// What was signed.
    pub input: String,
    /// The signature (an ES signature is `r || s`, as JWS and WebCrypto have it).
    pub signature: Vec<u8>,
}

impl Signed {
    /// A digest of all of it (algorithm, key, input, signature): what a host that checked the
    /// signature ahead remembers it by.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut digest = Sha256::new();
        for part in [
            self.alg.name().as_bytes(),
            self.key.to_string().as_bytes(),
            self.input.as_bytes(),
            &self.signature,
        ] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        digest.finalize().into()
    }
}

/// The host's cryptography: whether a signature holds.
pub trait Signatures: Send + Sync + fmt::Debug {
    /// Whether `signed.signature` is `signed.key`'s signature of `signed.input`.
    fn verified(&self, signed: &Signed) -> bool;
}

/// Signatures checked by `ring` (the TLS stack's cryptography on native hosts).
#[cfg(feature = "tokens")]
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeSignatures;

#[cfg(feature = "tokens")]
impl Signatures for NativeSignatures {
    fn verified(&self, signed: &Signed) -> bool {
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use ring::signature as s;
        if !signed.alg.fits(&signed.key) {
            return false;
        }
        let part = |name: &str| {
            (signed.key[name].as_str()).and_then(|text| URL_SAFE_NO_PAD.decode(text).ok())
        };
        let (input, signature) = (signed.input.as_bytes(), signed.signature.as_slice());
        let rsa = match signed.alg {
            Algorithm::ES256 | Algorithm::ES384 => {
                let (curve, size) = match signed.alg {
                    Algorithm::ES256 => (&s::ECDSA_P256_SHA256_FIXED, 32),
                    _ => (&s::ECDSA_P384_SHA384_FIXED, 48),
                };
                let (Some(x), Some(y)) = (part("x"), part("y")) else {
                    return false;
                };
                if x.len() != size || y.len() != size {
                    return false;
                }
                // The uncompressed point: 4, then x and y.
                let point = [&[4][..], &x, &y].concat();
                return s::UnparsedPublicKey::new(curve, point)
                    .verify(input, signature)
                    .is_ok();
            }
            Algorithm::RS256 => &s::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::RS384 => &s::RSA_PKCS1_2048_8192_SHA384,
            Algorithm::RS512 => &s::RSA_PKCS1_2048_8192_SHA512,
            Algorithm::PS256 => &s::RSA_PSS_2048_8192_SHA256,
            Algorithm::PS384 => &s::RSA_PSS_2048_8192_SHA384,
            Algorithm::PS512 => &s::RSA_PSS_2048_8192_SHA512,
        };
        let (Some(n), Some(e)) = (part("n"), part("e")) else {
            return false;
        };
        (s::RsaPublicKeyComponents { n, e }.verify(rsa, input, signature)).is_ok()
    }
}
