//! The roles development principals' tokens carried when they got a user delegation key: what
//! a user delegation SAS such a principal signed is judged by
//! ([`ifmatch_azure::delegation::check`]). A development token's roles live in the token alone,
//! so the service keeps them, in a record of the account's own among its containers' records
//! (`$delegators`, as `$service` keeps its properties): every instance of a fleet, and every
//! isolate of the Worker, then judges such a SAS alike, whichever gave the key. A principal of
//! an identity file needs none: its assignments are the file's.
//!
//! At most [`MAX_DELEGATORS`] principals are kept, each until the last key it got ends; past
//! that, the one whose key ends first is dropped (a SAS it signed then allows nothing).

use std::collections::BTreeMap;

use ifmatch_azure::identity::Assignment;

/// The name of the record that keeps an account's delegators, among its containers' (no
/// container's name has a `$`).
pub const DELEGATORS: &str = "$delegators";

/// The most principals an account's record keeps.
pub const MAX_DELEGATORS: usize = 1_000;

/// A development principal's roles, as its token carried them when it last got a key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delegator {
    /// The assignments its token carried.
    pub roles: Vec<Assignment>,
    /// When the last key it got ends, seconds since 1970.
    pub until: i64,
}

/// The delegators of an account, by principal.
pub type Delegators = BTreeMap<String, Delegator>;

/// `delegators` with `principal` as `delegator`, less those whose keys ended by `now` and,
/// past [`MAX_DELEGATORS`], those whose keys end first. `None` when nothing changes.
pub fn keeping(
    delegators: &Delegators,
    principal: &str,
    delegator: Delegator,
    now: i64,
) -> Option<Delegators> {
    let known = delegators.get(principal);
    // A later key of the same roles changes nothing a SAS is judged by until the first ends.
    if known.is_some_and(|d| d.roles == delegator.roles && d.until >= delegator.until) {
        return None;
    }
    let until = known.map_or(delegator.until, |d| d.until.max(delegator.until));
    let mut kept: Delegators = (delegators.iter())
        .filter(|(name, d)| d.until > now && name.as_str() != principal)
        .map(|(name, d)| (name.clone(), d.clone()))
        .collect();
    kept.insert(
        principal.to_owned(),
        Delegator {
            roles: delegator.roles,
            until,
        },
    );
    while kept.len() > MAX_DELEGATORS {
        let first = (kept.iter())
            .min_by_key(|(_, d)| d.until)
            .map(|(name, _)| name.clone())?;
        kept.remove(&first);
    }
    Some(kept)
}

/// What `principal`'s SAS is judged by at `now`: its kept roles while its key holds, none
/// after.
pub fn roles_of(delegators: &Delegators, principal: &str, now: i64) -> Vec<Assignment> {
    (delegators.get(principal))
        .filter(|d| d.until > now)
        .map(|d| d.roles.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(principal: &str) -> Vec<Assignment> {
        vec![Assignment {
            principal: principal.into(),
            role: "Storage Blob Data Reader".into(),
            scope: "/".into(),
        }]
    }

    #[test]
    fn a_principal_is_kept_until_its_last_key_ends_and_no_longer() {
        let first = Delegator {
            roles: reader("p"),
            until: 100,
        };
        let kept = keeping(&Delegators::new(), "p", first.clone(), 0).unwrap();
        assert_eq!(roles_of(&kept, "p", 99), reader("p"));
        assert!(roles_of(&kept, "p", 100).is_empty(), "its key ended");
        assert!(roles_of(&kept, "q", 0).is_empty(), "never kept");
        // The same roles under a key that ends sooner: nothing to write.
        let sooner = Delegator { until: 50, ..first };
        assert_eq!(keeping(&kept, "p", sooner, 0), None);
        // Other roles: they count from now, until the later of the two keys ends.
        let writer = Delegator {
            roles: vec![Assignment {
                role: "Storage Blob Data Contributor".into(),
                ..reader("p").remove(0)
            }],
            until: 50,
        };
        let kept = keeping(&kept, "p", writer.clone(), 10).unwrap();
        assert_eq!(
            kept["p"],
            Delegator {
                until: 100,
                ..writer
            }
        );
        // A principal whose key ended leaves at the next write.
        let other = Delegator {
            roles: reader("q"),
            until: 300,
        };
        let kept = keeping(&kept, "q", other, 200).unwrap();
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["q"]);
    }

    #[test]
    fn past_the_bound_the_key_that_ends_first_goes() {
        let mut kept = Delegators::new();
        for n in 0..=MAX_DELEGATORS as i64 {
            let delegator = Delegator {
                roles: reader("p"),
                until: 1_000 + n,
            };
            kept = keeping(&kept, &format!("p{n}"), delegator, 0).unwrap();
        }
        assert_eq!(kept.len(), MAX_DELEGATORS, "one past the bound");
        assert!(!kept.contains_key("p0"), "the first to end went");
        assert!(kept.contains_key(&format!("p{MAX_DELEGATORS}")));
    }
}
