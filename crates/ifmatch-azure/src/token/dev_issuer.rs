//! The development issuer (`ifmatch token`): a key of the server's own that signs tokens it
//! trusts, minted by `jsonwebtoken` over aws-lc-rs (native hosts only: the Worker is given
//! its public keys, never the key).

use std::time::{Duration, SystemTime};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};

use super::{Carried, Claims};
use crate::auth::unix;
use crate::identity::{DEV_TENANT, Issuer, dev_issuer};

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
        Issuer::development(self.jwks()).expect("a key set of one key")
    }

    /// Its public key as a JSON Web Key Set: what a server that cannot read the key itself
    /// (the Worker) is given to trust it.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.public] })
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
