//! Entra ID access tokens (JWTs), checked as Azure's services check them: the signature
//! against the keys of a trusted issuer (the one whose key the header's `kid` names), the
//! issuer, the audience, the lifetime with five minutes of skew, the tenant, the principal;
//! and the development issuer that mints such tokens (`ifmatch token`).
//!
//! A token is taken apart and its claims checked here, against the request's clock (the
//! host's, which tests set), with messages a user can act on, the same on every host. Only
//! asymmetric algorithms are taken: a token signed with HMAC (the public key as a secret) or
//! `alg: none` is refused before any key is looked at. The signature itself is checked by the
//! host's cryptography ([`crate::signature`]).

use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::auth::unix;
use crate::identity::{Access, Assignment, Identity, Issuer};
use crate::signature::{Algorithm, Signed};

#[cfg(feature = "tokens")]
mod dev_issuer;
#[cfg(feature = "tokens")]
pub use dev_issuer::DevIssuer;

/// The longest token taken, in bytes (Entra's access tokens are 1 to 3 KiB; a group-heavy one
/// stays under 8 KiB).
pub const MAX_TOKEN: usize = 16 * 1024;

/// How far `exp` and `nbf` may be from the server's clock: Azure's five minutes.
pub const SKEW: Duration = Duration::from_secs(5 * 60);

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not a JWT of a form taken (its words say how).
    Malformed(String),
    /// Longer than [`MAX_TOKEN`].
    TooLarge(usize),
    /// Signed with a symmetric algorithm, or none.
    Algorithm(String),
    /// Its `kid` names no key of a trusted issuer.
    UnknownKey(String),
    /// The signature does not verify.
    Signature,
    /// Its `iss` is not its key's issuer.
    Issuer(String),
    /// Its `aud` is none of the service's.
    Audience(String),
    /// Expired, or not yet valid.
    Lifetime(String),
    /// Its `tid` is not its issuer's tenant.
    Tenant(String),
    /// It names no principal (`oid`).
    NoPrincipal,
    /// This host checks no signatures (it was given no
    /// [`Signatures`](crate::signature::Signatures)).
    Unverifiable,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "The token is malformed: {why}."),
            Self::TooLarge(len) => write!(
                f,
                "The token is {len} bytes: at most {MAX_TOKEN} are taken."
            ),
            Self::Algorithm(alg) => write!(
                f,
                "Signature validation failed: algorithm {alg} is not taken (RS256, RS384, \
                 RS512, PS256, PS384, PS512, ES256, ES384 are)."
            ),
            Self::UnknownKey(kid) => write!(
                f,
                "Signature validation failed: no key of a trusted issuer has the id {kid:?}."
            ),
            Self::Signature => write!(f, "Signature validation failed. Signature is invalid."),
            Self::Issuer(iss) => write!(
                f,
                "Issuer validation failed. Issuer {iss:?} is not the issuer of the token's key."
            ),
            Self::Audience(aud) => write!(
                f,
                "Audience validation failed. Audience {aud} did not match this service."
            ),
            Self::Lifetime(why) => write!(f, "Lifetime validation failed. {why}"),
            Self::Tenant(tid) => write!(
                f,
                "Tenant validation failed: the token's tenant {tid:?} is not its issuer's."
            ),
            Self::NoPrincipal => write!(f, "The token names no principal (oid)."),
            Self::Unverifiable => write!(
                f,
                "Signature validation failed: this server checks no token's signature."
            ),
        }
    }
}

/// The claims read from a token.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Claims {
    /// The issuer.
    pub iss: String,
    /// The audience: one, or a list.
    pub aud: serde_json::Value,
    /// Expiry, seconds since the epoch.
    pub exp: Option<i64>,
    /// Not before, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Issued at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// The tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<String>,
    /// The principal's object id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oid: Option<String>,
    /// The subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// A development token's own role assignments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ifmatch_roles: Vec<Carried>,
}

/// A role assignment a development token carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    /// The role's name or id.
    pub role: String,
    /// Its scope.
    pub scope: String,
}

/// The token an `Authorization` header carries, if it carries one: Storage's
/// `Bearer {token}`, or Cosmos DB's `type=aad&ver=1.0&sig={token}` (percent-encoded, as its
/// SDKs send it). What a host that checks signatures ahead checks; each service reads its own
/// header for what it decides.
pub fn carried(authorization: &str) -> Option<String> {
    if let Some(token) = authorization.strip_prefix("Bearer ") {
        return Some(token.trim().to_owned());
    }
    let decoded = percent_encoding::percent_decode_str(authorization).decode_utf8_lossy();
    let pairs = || decoded.split('&').filter_map(|pair| pair.split_once('='));
    match pairs().any(|pair| pair == ("type", "aad")) {
        true => pairs()
            .find(|(name, _)| *name == "sig")
            .map(|(_, t)| t.to_owned()),
        false => None,
    }
}

/// A token's header, as read.
#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

/// The bytes a part of a token encodes (base64url, unpadded).
fn decoded(part: &str, what: &str) -> Result<Vec<u8>, TokenError> {
    (URL_SAFE_NO_PAD.decode(part))
        .map_err(|e| TokenError::Malformed(format!("its {what} is not base64url: {e}")))
}

impl Identity {
    /// What of `token` its signature must hold for, by which trusted issuer's key: what a host
    /// whose cryptography is asynchronous (the Worker's WebCrypto) checks ahead of
    /// [`Identity::verify`].
    pub fn signed(&self, token: &str) -> Result<Signed, TokenError> {
        self.taken_apart(token).map(|(_, signed, _)| signed)
    }

    /// `token`'s issuer, what its signature must hold for, and its claims, still encoded.
    fn taken_apart<'t>(&self, token: &'t str) -> Result<(&Issuer, Signed, &'t str), TokenError> {
        if token.len() > MAX_TOKEN {
            return Err(TokenError::TooLarge(token.len()));
        }
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed(
                "a JWT is three parts, header.claims.signature".into(),
            ));
        };
        let header: Header = serde_json::from_slice(&decoded(header, "header")?)
            .map_err(|e| TokenError::Malformed(format!("its header: {e}")))?;
        let alg = Algorithm::named(&header.alg)
            .ok_or_else(|| TokenError::Algorithm(header.alg.clone()))?;
        let kid = (header.kid)
            .ok_or_else(|| TokenError::Malformed("its header names no key (kid)".into()))?;
        let (issuer, key) = (self.issuers.iter())
            .find_map(|issuer| Some((issuer, issuer.key(&kid)?)))
            .ok_or_else(|| TokenError::UnknownKey(kid.clone()))?;
        if !alg.fits(&key) {
            return Err(TokenError::Algorithm(format!(
                "{} with this key",
                alg.name()
            )));
        }
        let signed = Signed {
            alg,
            key,
            input: token[..token.len() - signature.len() - 1].to_owned(),
            signature: decoded(signature, "signature")?,
        };
        Ok((issuer, signed, claims))
    }

    /// What `token` allows in `account`, if a trusted issuer signed it for one of `audiences`
    /// (the service's own; this identity's configured ones are added) and it holds at `now`.
    pub fn verify(
        &self,
        token: &str,
        audiences: &[String],
        account: &str,
        now: SystemTime,
    ) -> Result<Access, TokenError> {
        let (issuer, signed, claims) = self.taken_apart(token)?;
        let signatures = self.signatures.as_deref().ok_or(TokenError::Unverifiable)?;
        if !signatures.verified(&signed) {
            return Err(TokenError::Signature);
        }
        let claims: Claims = serde_json::from_slice(&decoded(claims, "claims")?)
            .map_err(|e| TokenError::Malformed(format!("its claims: {e}")))?;
        if claims.iss != issuer.issuer {
            return Err(TokenError::Issuer(claims.iss));
        }
        let trim = |a: &str| a.trim_end_matches('/').to_ascii_lowercase();
        let wanted: Vec<String> = (audiences.iter().chain(&self.audiences))
            .map(|a| trim(a))
            .collect();
        let given: Vec<&str> = match &claims.aud {
            serde_json::Value::String(one) => vec![one.as_str()],
            serde_json::Value::Array(many) => many.iter().filter_map(|a| a.as_str()).collect(),
            _ => Vec::new(),
        };
        if !given.iter().any(|a| wanted.contains(&trim(a))) {
            return Err(TokenError::Audience(format!("{:?}", claims.aud)));
        }
        let now = unix(now);
        let skew = SKEW.as_secs() as i64;
        let exp = (claims.exp)
            .ok_or_else(|| TokenError::Lifetime("The token has no expiry (exp).".into()))?;
        if now > exp + skew {
            return Err(TokenError::Lifetime(format!(
                "The token is expired: it expired at {exp}, the server's time is {now} \
                 (seconds since 1970)."
            )));
        }
        if let Some(nbf) = claims.nbf
            && now + skew < nbf
        {
            return Err(TokenError::Lifetime(format!(
                "The token is not valid yet: not before {nbf}, the server's time is {now}."
            )));
        }
        if let Some(tenant) = &issuer.tenant
            && claims.tid.as_ref() != Some(tenant)
        {
            return Err(TokenError::Tenant(claims.tid.unwrap_or_default()));
        }
        let principal = claims.oid.as_deref().ok_or(TokenError::NoPrincipal)?;
        let carried: Vec<Assignment> = match issuer.development {
            true => (claims.ifmatch_roles.iter())
                .map(|c| Assignment {
                    principal: principal.to_owned(),
                    role: c.role.clone(),
                    scope: c.scope.clone(),
                })
                .collect(),
            false => Vec::new(),
        };
        let mut access = self.access(principal, account, &carried);
        access.tenant = (claims.tid.or_else(|| issuer.tenant.clone())).unwrap_or_default();
        Ok(access)
    }
}

#[cfg(all(test, feature = "tokens"))]
mod tests;
