//! Entra ID access tokens (JWTs), checked as Azure's services check them: the signature
//! against the keys of a trusted issuer (the one whose key the header's `kid` names), the
//! issuer, the audience, the lifetime with five minutes of skew, the tenant, the principal;
//! and the development issuer that mints such tokens (`ifmatch token`).
//!
//! The JWS work is `jsonwebtoken`'s (over aws-lc-rs); the claims are checked here against the
//! request's clock (the host's, which tests set), with messages a user can act on. Only
//! asymmetric algorithms are taken: a token signed with HMAC (the public key as a secret) or
//! `alg: none` is refused before any key is looked at.

use std::fmt;
use std::time::{Duration, SystemTime};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::auth::unix;
use crate::identity::{Access, Assignment, DEV_TENANT, Identity, Issuer, KeySource, dev_issuer};

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

impl Identity {
    /// What `token` allows in `account`, if a trusted issuer signed it for one of `audiences`
    /// (the service's own; this identity's configured ones are added) and it holds at `now`.
    pub fn verify(
        &self,
        token: &str,
        audiences: &[String],
        account: &str,
        now: SystemTime,
    ) -> Result<Access, TokenError> {
        if token.len() > MAX_TOKEN {
            return Err(TokenError::TooLarge(token.len()));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        use Algorithm::*;
        if !matches!(
            header.alg,
            RS256 | RS384 | RS512 | PS256 | PS384 | PS512 | ES256 | ES384
        ) {
            return Err(TokenError::Algorithm(format!("{:?}", header.alg)));
        }
        let kid = (header.kid)
            .ok_or_else(|| TokenError::Malformed("its header names no key (kid)".into()))?;
        let (issuer, key) = (self.issuers.iter())
            .find_map(|issuer| Some((issuer, issuer.key(&kid)?)))
            .ok_or_else(|| TokenError::UnknownKey(kid.clone()))?;
        let key: Jwk =
            serde_json::from_value(key).map_err(|_| TokenError::UnknownKey(kid.clone()))?;
        let key = DecodingKey::from_jwk(&key).map_err(|_| TokenError::UnknownKey(kid))?;
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::Signature,
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                    TokenError::Algorithm(format!("{:?} with this key", header.alg))
                }
                _ => TokenError::Malformed(e.to_string()),
            })?
            .claims;
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
        if issuer.development {
            self.learn(principal, &carried);
        }
        let mut access = self.access(principal, account, &carried);
        access.tenant = (claims.tid.or_else(|| issuer.tenant.clone())).unwrap_or_default();
        Ok(access)
    }
}

/// The development issuer: a key of the server's own (a P-256 key, PKCS#8 PEM) that signs
/// tokens the server trusts, each carrying the roles it was minted with.
pub struct DevIssuer {
    key: EncodingKey,
    public: Jwk,
}

impl DevIssuer {
    /// The issuer of this private key.
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let key = EncodingKey::from_ec_pem(pem)
            .map_err(|e| format!("the development issuer's key: {e}"))?;
        let mut public = Jwk::from_encoding_key(&key, Algorithm::ES256)
            .map_err(|e| format!("the development issuer's key: {e}"))?;
        let kid = public.thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256);
        public.common.key_id = Some(kid);
        Ok(Self { key, public })
    }

    /// The trusted issuer entry of this key.
    pub fn issuer(&self) -> Issuer {
        let keys = serde_json::json!({ "keys": [self.public] });
        let tenant = Some(DEV_TENANT.to_owned());
        let mut issuer = Issuer::new(dev_issuer(), tenant, keys, KeySource::Given)
            .expect("a key set of one key");
        issuer.development = true;
        issuer
    }

    /// Its public key, as a JWK.
    pub fn public(&self) -> &Jwk {
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
        let mut header = Header::new(Algorithm::ES256);
        header.kid = self.public.common.key_id.clone();
        jsonwebtoken::encode(&header, &claims, &self.key).expect("an ES256 key signs")
    }
}

#[cfg(test)]
mod tests;
