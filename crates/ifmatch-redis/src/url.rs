//! The URLs of a Redis with many hosts: a Cluster's (`redis+cluster://H1:P1,H2:P2`) and a set of
//! Sentinels' (`redis+sentinel://H1:P1,H2:P2/MASTER/DB`); one server's are the `redis` crate's.

use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{ErrorKind, RedisError, RedisResult};

fn invalid(why: &'static str) -> RedisError {
    RedisError::from((ErrorKind::InvalidClientConfig, why))
}

/// The hosts of a URL with many (`[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]`, what follows its
/// scheme), the credentials it gives, and the rest of it (its path).
fn hosts(rest: &str) -> RedisResult<(Vec<&str>, redis::RedisConnectionInfo, &str)> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (Some(credentials), hosts),
        None => (None, authority),
    };
    let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    if hosts.is_empty() {
        return Err(invalid("the URL names no host"));
    }
    let mut info = redis::RedisConnectionInfo::default();
    if let Some(credentials) = credentials {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let (user, password) = credentials.split_once(':').unwrap_or(("", credentials));
        if !user.is_empty() {
            info = info.set_username(decode(user));
        }
        info = info.set_password(decode(password));
    }
    Ok((hosts, info, path))
}

/// The nodes of a `redis+cluster://` URL (`None`: another scheme). The form:
/// `redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/]`: any of the cluster's nodes,
/// which tell the rest; a cluster has one database.
pub(crate) fn cluster_url(url: &str) -> RedisResult<Option<Vec<redis::ConnectionInfo>>> {
    let Some(rest) = url.strip_prefix("redis+cluster://") else {
        return Ok(None);
    };
    let (hosts, info, path) = hosts(rest)?;
    if !matches!(path, "" | "0" | "0/") {
        return Err(invalid(
            "a cluster URL has no path: redis+cluster://H1:P1,H2:P2",
        ));
    }
    let nodes = hosts.into_iter().map(|host| {
        let node = redis::IntoConnectionInfo::into_connection_info(format!("redis://{host}"))?;
        Ok(node.set_redis_settings(info.clone()))
    });
    nodes.collect::<RedisResult<_>>().map(Some)
}

/// The Sentinels and the master's name of a `redis+sentinel://` URL (`None`: another scheme).
/// The form: `redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]`; the
/// credentials and the database are the master's.
pub(crate) fn sentinel_url(url: &str) -> RedisResult<Option<SentinelClient>> {
    let Some(rest) = url.strip_prefix("redis+sentinel://") else {
        return Ok(None);
    };
    let (hosts, info, path) = hosts(rest)?;
    let mut path = path.trim_end_matches('/').split('/');
    let master = path.next().filter(|m| !m.is_empty());
    let master = master.ok_or_else(|| {
        invalid("a Sentinel URL names its master: redis+sentinel://H1:P1,H2:P2/MASTER/DB")
    })?;
    let db = match path.next() {
        None => 0,
        Some(db) => db
            .parse::<i64>()
            .map_err(|_| invalid("a Sentinel URL's database is a number"))?,
    };
    if path.next().is_some() {
        return Err(invalid("a Sentinel URL's path is /MASTER/DB"));
    }
    let sentinels: Vec<String> = hosts.iter().map(|h| format!("redis://{h}")).collect();
    let node = redis::sentinel::SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(info.set_db(db));
    let client = SentinelClient::build(
        sentinels,
        master.to_owned(),
        Some(node),
        SentinelServerType::Master,
    )?;
    Ok(Some(client))
}
