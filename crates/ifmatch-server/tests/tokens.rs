//! Entra ID bearer tokens (`Authorization: Bearer`) on every Storage endpoint: minted by the
//! development issuer (`ifmatch token`), taken by the server over the same data directory,
//! judged by the roles they carry; the official Python SDKs with a token credential as
//! production code has one; and every malformed, foreign or misplaced token refused as Azure
//! refuses it, the server answering on.

mod common;

use std::path::Path;

/// `ifmatch serve --https` over `data`, its blob, queue, table and Cosmos ports.
fn serve(data: &Path, https: bool) -> (common::Process, [u16; 4]) {
    let ports = [
        common::free_port(),
        common::free_port(),
        common::free_port(),
        common::free_port(),
    ];
    let mut command = std::process::Command::new(common::binary());
    command.arg("serve").arg("--data").arg(data);
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
    let output = std::process::Command::new(common::binary())
        .arg("token")
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_tokens_do_what_their_roles_permit_and_nothing_else() {
    let data = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (_server, ports) = serve(data.path(), true);
    let endpoint = |port: u16| format!("https://localhost:{port}/{}", common::ACCOUNT);
    let connection = format!(
        "DefaultEndpointsProtocol=https;AccountName={};AccountKey={};BlobEndpoint={};\
         QueueEndpoint={};TableEndpoint={};",
        common::ACCOUNT,
        ifmatch_azure::DEV_KEY,
        endpoint(ports[0]),
        endpoint(ports[1]),
        endpoint(ports[2]),
    );
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
        common::python_script_with("tokens.py", &args, &vars, "python tokens: 11 passed");
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
