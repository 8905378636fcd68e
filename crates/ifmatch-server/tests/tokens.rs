//! Entra ID bearer tokens (`Authorization: Bearer`) on every Storage endpoint: minted by the
//! development issuer (`ifmatch token`), taken by the server over the same data directory,
//! judged by the roles they carry; the official Python SDKs with a token credential as
//! production code has one; and every malformed, foreign or misplaced token refused as Azure
//! refuses it, the server answering on.

use crate::common;

use std::path::Path;

/// `ifmatch serve --https` over `data`, its blob, queue, table and Cosmos ports.
fn serve(data: &Path, https: bool) -> (common::Process, [u16; 4]) {
    serve_with(data, https, &[], &[])
}

/// [`serve`] with `args` more and the environment `vars`.
fn serve_with(
    data: &Path,
    https: bool,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (common::Process, [u16; 4]) {
    let ports = [
        common::free_port(),
        common::free_port(),
        common::free_port(),
        common::free_port(),
    ];
    let mut command = std::process::Command::new(common::binary());
    command.arg("serve").arg("--data").arg(data).args(args);
    command.envs(vars.iter().copied());
    if https {
        command.arg("--https");
    }
    let flags = [
        "--listen",
        "--queue-listen",
        "--table-listen",
        "--cosmos-listen",
    ];
    for (flag, port) in flags.iter().zip(ports) {
        command.args([flag.to_string(), format!("127.0.0.1:{port}")]);
    }
    let process = common::Process::listening(command, ports[0], "ifmatch serve");
    common::wait_for(ports[1], "queue-listen");
    common::wait_for(ports[2], "table-listen");
    common::wait_for(ports[3], "cosmos-listen");
    // The certificate is written once the ports are bound.
    let certificate = data.join("tls/cert.pem");
    for _ in 0..200 {
        if !https || certificate.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (process, ports)
}

/// A token of `data`'s development issuer with `args` (`--role`, `--scope`, ...).
fn token(data: &Path, args: &[&str]) -> String {
    token_with(data, args, &[])
}

/// [`token`] with the environment `vars`.
fn token_with(data: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    let output = std::process::Command::new(common::binary())
        .arg("token")
        .arg("--data")
        .arg(data)
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Two instances of a fleet over `backend` (with the environment `vars`), with one data
/// directory (`shared`: a Redis fleet's bytes are there) or each their own, take the tokens `ifmatch token --backend` mints, whichever made the
/// fleet's development issuer, and judge them by their roles alike; a token of one instance's
/// own data directory's issuer is no fleet's.
async fn a_fleet_takes_the_tokens_its_backend_mints(
    backend: &str,
    shared: bool,
    vars: &[(&str, &str)],
) {
    let dirs = [(); 3].map(|_| tempfile::tempdir().unwrap());
    let data = [dirs[0].path(), dirs[usize::from(!shared)].path()];
    // One certificate for the fleet's name, as an operator gives every instance.
    let tls = common::TestCertificates::new();
    let (cert, key) = (tls.cert.to_str().unwrap(), tls.key.to_str().unwrap());
    let flags = ["--backend", backend, "--tls-cert", cert, "--tls-key", key];
    // Started at once: both make the fleet's issuer, and agree on one.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| serve_with(data[0], false, &flags, vars));
        let b = s.spawn(|| serve_with(data[1], false, &flags, vars));
        (a.join().unwrap(), b.join().unwrap())
    });
    let root = reqwest::Certificate::from_pem(&std::fs::read(&tls.ca).unwrap()).unwrap();
    let client = reqwest::Client::builder().add_root_certificate(root);
    let client = client.build().unwrap();
    let at = |port: u16, path: &str| format!("https://localhost:{port}/{}{path}", common::ACCOUNT);
    let send = |method: reqwest::Method, url: String, token: &str| {
        client
            .request(method, url)
            .header("authorization", format!("Bearer {token}"))
            .header("x-ms-version", "2021-08-06")
            .send()
    };
    let fleet = ["--backend", backend];
    let mint = |role: &str| {
        let args = [&fleet[..], &["--role", role]].concat();
        token_with(dirs[2].path(), &args, vars)
    };
    let (writer, reader) = (
        mint("Storage Blob Data Contributor"),
        mint("Storage Blob Data Reader"),
    );
    let put = reqwest::Method::PUT;
    let made = send(
        put.clone(),
        at(a.1[0], "/minted?restype=container"),
        &writer,
    );
    assert_eq!(
        made.await.unwrap().status(),
        201,
        "A takes the fleet's token"
    );
    let listed = send(reqwest::Method::GET, at(b.1[0], "?comp=list"), &reader).await;
    let listed = listed.unwrap();
    assert_eq!(listed.status(), 200, "B takes the fleet's token");
    assert!(listed.text().await.unwrap().contains("<Name>minted</Name>"));
    let refused = send(put.clone(), at(b.1[0], "/read?restype=container"), &reader).await;
    let refused = refused.unwrap();
    assert_eq!(refused.status(), 403, "a reader's token writes nothing");
    assert_eq!(
        refused.headers()["x-ms-error-code"],
        "AuthorizationPermissionMismatch"
    );
    // The issuer of A's own data directory (an `ifmatch token` without --backend) is no one
    // the fleet trusts.
    let own = token(dirs[0].path(), &["--role", "Storage Blob Data Owner"]);
    for port in [a.1[0], b.1[0]] {
        let answer = send(put.clone(), at(port, "/own?restype=container"), &own).await;
        assert_eq!(answer.unwrap().status(), 401);
    }
    let jwks = |dir: &Path| token_with(dir, &[&fleet[..], &["--jwks"]].concat(), vars);
    assert_eq!(jwks(dirs[0].path()), jwks(dirs[2].path()), "one issuer");
    // A user delegation key got through one instance signs SAS the other judges alike.
    let args = [at(a.1[0], ""), at(b.1[0], ""), writer, reader];
    let script = move || {
        let vars = [("REQUESTS_CA_BUNDLE", tls.ca.as_os_str())];
        let tally = "python fleet delegation: 2 passed";
        common::python_script_with("fleet_delegation.py", &args, &vars, tally);
    };
    tokio::task::spawn_blocking(script).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_over_redis_takes_the_tokens_its_backend_mints() {
    let redis = ifmatch_redis::testing::RedisServer::start();
    a_fleet_takes_the_tokens_its_backend_mints(&redis.url(), true, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_over_a_bucket_takes_the_tokens_its_backend_mints() {
    let bucket = common::Bucket::start().await;
    let vars = bucket.vars();
    a_fleet_takes_the_tokens_its_backend_mints(&bucket.url("ifmatch"), false, &vars).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_tokens_do_what_their_roles_permit_and_nothing_else() {
    let data = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (_server, ports) = serve(data.path(), true);
    let connection = common::https_connection([ports[0], ports[1], ports[2]]);
    let certificate = data.path().join("tls/cert.pem");
    let args = [
        connection.into(),
        common::binary().into_os_string(),
        data.path().as_os_str().to_owned(),
        other.path().as_os_str().to_owned(),
        format!("https://localhost:{}/", ports[3]).into(),
    ];
    let script = move || {
        let vars = [("REQUESTS_CA_BUNDLE", certificate.as_os_str())];
        common::python_script_with("tokens.py", &args, &vars, "python tokens: 16 passed");
    };
    tokio::task::spawn_blocking(script).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_token_is_refused_as_azure_refuses_it_and_the_server_answers_on() {
    let data = tempfile::tempdir().unwrap();
    // Two processes making the development issuer's key at once agree on one.
    let minted = std::thread::scope(|s| {
        let first = s.spawn(|| token(data.path(), &["--role", "Storage Blob Data Reader"]));
        let second = s.spawn(|| token(data.path(), &["--role", "Storage Blob Data Reader"]));
        [first.join().unwrap(), second.join().unwrap()]
    });
    let (_server, ports) = serve(data.path(), true);
    let root = std::fs::read(data.path().join("tls/cert.pem")).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&root).unwrap())
        .build()
        .unwrap();
    let list = format!(
        "https://localhost:{}/{}?comp=list",
        ports[0],
        common::ACCOUNT
    );
    let ask = |authorization: String, version: &str| {
        client
            .get(&list)
            .header("authorization", authorization)
            .header("x-ms-version", version)
            .send()
    };
    for token in &minted {
        let answer = ask(format!("Bearer {token}"), "2021-08-06").await.unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    }
    // Before the version that took bearer tokens: Azure's 403.
    let old = ask(format!("Bearer {}", minted[0]), "2017-07-29")
        .await
        .unwrap();
    assert_eq!(old.status(), 403);
    assert_eq!(old.headers()["x-ms-error-code"], "AuthenticationFailed");

    // A token of another issuer, expired, for another audience, malformed, unsigned.
    let stranger = tempfile::tempdir().unwrap();
    let parts: Vec<&str> = minted[0].split('.').collect();
    let none = base64_url(r#"{"alg":"none","typ":"JWT"}"#);
    let bad = [
        (
            "another issuer",
            token(stranger.path(), &["--role", "Storage Blob Data Owner"]),
        ),
        (
            "another audience",
            token(
                data.path(),
                &[
                    "--role",
                    "Storage Blob Data Owner",
                    "--audience",
                    "https://vault.azure.net",
                ],
            ),
        ),
        ("unsigned", format!("{none}.{}.", parts[1])),
        (
            "signature of another",
            format!("{}.{}.{}", parts[0], base64_url(r#"{"oid":"x"}"#), parts[2]),
        ),
        ("not a token", "not-a-token".into()),
        ("empty", String::new()),
    ];
    for (what, token) in bad {
        let answer = ask(format!("Bearer {token}"), "2021-08-06").await.unwrap();
        assert_eq!(answer.status(), 401, "{what}");
        assert_eq!(
            answer.headers()["x-ms-error-code"],
            "InvalidAuthenticationInfo",
            "{what}"
        );
        let challenge = answer.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains("resource_id=https://storage.azure.com"),
            "{what}: {challenge}"
        );
    }
    // A header that is not ASCII is no credential of any scheme.
    let answer = ask(format!("Bearer {}", "ü".repeat(10)), "2021-08-06")
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    assert_eq!(answer.headers()["x-ms-error-code"], "AuthenticationFailed");
    // Longer than any token taken (16 KiB) or than the headers the server reads: refused.
    for len in [17 * 1024, 70 * 1024] {
        let huge = ask(format!("Bearer {}", "a".repeat(len)), "2021-08-06").await;
        // Over HTTP/2, a header list far past the limit ends the connection (GOAWAY).
        if let Ok(answer) = huge {
            let status = answer.status();
            assert!(status == 401 || status == 431, "{len}: {status}");
        }
    }
    // The server answers on.
    let answer = ask(format!("Bearer {}", minted[0]), "2021-08-06")
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_over_plain_http_is_refused_with_the_challenge() {
    let data = tempfile::tempdir().unwrap();
    let (_server, ports) = serve(data.path(), false);
    let reader = token(data.path(), &["--role", "Storage Blob Data Owner"]);
    let list = format!(
        "http://127.0.0.1:{}/{}?comp=list",
        ports[0],
        common::ACCOUNT
    );
    let answer = reqwest::Client::new()
        .get(&list)
        .header("authorization", format!("Bearer {reader}"))
        .header("x-ms-version", "2021-08-06")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    assert!(answer.headers().contains_key("www-authenticate"));
    assert!(answer.text().await.unwrap().contains("HTTPS only"));
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// An issuer of the test's own, as Entra is one: an OpenID discovery document naming a JWKS
/// URL, whose keys the test replaces (a rotation).
struct Issuer {
    keys: std::sync::Arc<std::sync::Mutex<serde_json::Value>>,
    discovery: String,
}

impl Issuer {
    async fn start() -> Self {
        use axum::routing::get;
        let keys = std::sync::Arc::new(std::sync::Mutex::new(serde_json::json!({"keys": []})));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let document = serde_json::json!({ "issuer": ISSUER, "jwks_uri": format!("{base}/keys") });
        let served = keys.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || async move { document.to_string() }),
            )
            .route(
                "/keys",
                get(move || async move { served.lock().unwrap().to_string() }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            keys,
            discovery: format!("{base}/.well-known/openid-configuration"),
        }
    }

    /// Publishes `key` alone, as `kid`, for `alg`.
    fn publish(&self, key: &jsonwebtoken::EncodingKey, alg: jsonwebtoken::Algorithm, kid: &str) {
        let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(key, alg).unwrap();
        jwk.common.key_id = Some(kid.into());
        *self.keys.lock().unwrap() = serde_json::json!({ "keys": [jwk] });
    }
}

const ISSUER: &str = "https://sts.windows.net/tenant-a/";

/// A token as Entra gives one for `principal`, signed by `key` as `kid`.
fn entra_token(
    key: &jsonwebtoken::EncodingKey,
    alg: jsonwebtoken::Algorithm,
    kid: &str,
    principal: &str,
) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({
        "iss": ISSUER, "aud": "https://storage.azure.com/", "tid": "tenant-a",
        "oid": principal, "exp": now + 3600, "nbf": now - 10,
        // Roles a token claims for itself count for nothing: the file's assignments do.
        "ifmatch_roles": [{"role": "Storage Blob Data Owner", "scope": "/"}],
    });
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuers_keys_are_found_by_discovery_and_followed_through_a_rotation() {
    use jsonwebtoken::{Algorithm, EncodingKey};
    let keys = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ifmatch-azure/src/token");
    let rsa =
        EncodingKey::from_rsa_pem(&std::fs::read(keys.join("test-rsa.pem")).unwrap()).unwrap();
    let ec =
        EncodingKey::from_ec_pem(&std::fs::read(keys.join("test-ec-other.pem")).unwrap()).unwrap();
    let issuer = Issuer::start().await;
    issuer.publish(&rsa, Algorithm::RS256, "k1");
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("identity.json");
    let config = serde_json::json!({
        "issuers": [{"issuer": ISSUER, "tenant": "tenant-a", "discovery": issuer.discovery}],
        "assignments": [{"principal": "app", "role": "Storage Blob Data Reader", "scope": "/"}],
    });
    std::fs::write(&file, config.to_string()).unwrap();
    std::fs::create_dir_all(data.path().join("d")).unwrap();
    let ports = [common::free_port(), common::free_port()];
    let mut command = std::process::Command::new(common::binary());
    command
        .arg("serve")
        .arg("--https")
        .arg("--identity")
        .arg(&file);
    command.arg("--data").arg(data.path().join("d"));
    command.args(["--listen", &format!("127.0.0.1:{}", ports[0])]);
    command.args([
        "--queue-listen",
        "off",
        "--table-listen",
        "off",
        "--cosmos-listen",
        "off",
    ]);
    let _server = common::Process::listening(command, ports[0], "ifmatch serve");
    let certificate = data.path().join("d/tls/cert.pem");
    while !certificate.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let root = std::fs::read(&certificate).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&root).unwrap())
        .build()
        .unwrap();
    let base = format!("https://localhost:{}/{}", ports[0], common::ACCOUNT);
    let ask = |method: reqwest::Method, url: String, token: String| {
        client
            .request(method, url)
            .header("authorization", format!("Bearer {token}"))
            .header("x-ms-version", "2021-08-06")
            .send()
    };
    let list = || format!("{base}?comp=list");
    // The status of listing with `token` once it is 200, or after 30 s.
    let listed = |token: String| async move {
        let answer = ask(reqwest::Method::GET, list(), token).await;
        answer.unwrap().status().as_u16()
    };
    let taken = |token: String| async move {
        let started = std::time::Instant::now();
        loop {
            let status = listed(token.clone()).await;
            if status == 200 || started.elapsed() > std::time::Duration::from_secs(30) {
                return status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    // Until the first fetch: 401 (the key is not known yet).
    let first = entra_token(&rsa, Algorithm::RS256, "k1", "app");
    assert_eq!(
        taken(first.clone()).await,
        200,
        "the discovered key was not taken"
    );
    // The file's role, not the token's claim: a reader may not create a container.
    let create = ask(
        reqwest::Method::PUT,
        format!("{base}/box?restype=container"),
        first.clone(),
    )
    .await
    .unwrap();
    assert_eq!(create.status(), 403);
    assert_eq!(
        create.headers()["x-ms-error-code"],
        "AuthorizationPermissionMismatch"
    );
    // Another principal has no assignment.
    let nobody = entra_token(&rsa, Algorithm::RS256, "k1", "stranger");
    assert_eq!(listed(nobody).await, 403);

    // The issuer rotates to a new key: a token under it is taken once the server, told of the
    // unknown key by that token, fetches again; the old key's tokens are then refused.
    issuer.publish(&ec, Algorithm::ES256, "k2");
    let rotated = entra_token(&ec, Algorithm::ES256, "k2", "app");
    assert_eq!(taken(rotated).await, 200, "the rotated key was not fetched");
    assert_eq!(listed(first).await, 401);
}
