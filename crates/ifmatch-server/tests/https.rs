//! `ifmatch serve --https`: every endpoint (blobs, queues, tables) over HTTPS with one
//! certificate, made on first start under the data directory and kept; the official Python SDKs
//! unchanged against it, trusting that certificate alone; plain HTTP is not answered there. (What
//! bearer tokens may do is `tokens.rs`.)

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_is_served_over_https_with_the_certificate_made_on_first_start() {
    let data = tempfile::tempdir().unwrap();
    let ports = [
        common::free_port(),
        common::free_port(),
        common::free_port(),
    ];
    let start = || {
        let mut command = std::process::Command::new(common::binary());
        command
            .arg("serve")
            .arg("--https")
            .arg("--data")
            .arg(data.path());
        for (flag, port) in ["--listen", "--queue-listen", "--table-listen"]
            .iter()
            .zip(ports)
        {
            command.args([flag.to_string(), format!("127.0.0.1:{port}")]);
        }
        command.args(["--cosmos-listen", "off"]);
        let process = common::Process::listening(command, ports[0], "ifmatch serve --https");
        common::wait_for(ports[1], "queue-listen");
        common::wait_for(ports[2], "table-listen");
        process
    };
    let server = start();
    let certificate = data.path().join("tls/cert.pem");
    let endpoint = |port: u16| format!("https://localhost:{port}/{}", common::ACCOUNT);
    let connection = common::https_connection(ports);
    let script = {
        let (connection, certificate) = (connection.clone(), certificate.clone());
        move || {
            let vars = [("REQUESTS_CA_BUNDLE", certificate.as_os_str())];
            let tally = "python https: 5 passed";
            common::python_script_with("https.py", &[connection], &vars, tally);
        }
    };
    tokio::task::spawn_blocking(script).await.unwrap();

    // Plain HTTP on the HTTPS ports is not answered as HTTP.
    let plain = reqwest::Client::new();
    for port in ports {
        let url = format!("http://127.0.0.1:{port}/{}?comp=list", common::ACCOUNT);
        let answered = plain.get(&url).send().await;
        assert!(answered.is_err(), "port {port}: {answered:?}");
    }
    // The same certificate on the next start: a client told to trust it once still does.
    let before = std::fs::read(&certificate).unwrap();
    drop(server);
    let _server = start();
    assert_eq!(std::fs::read(&certificate).unwrap(), before);
    let root = reqwest::Certificate::from_pem(&before).unwrap();
    let trusting = reqwest::Client::builder()
        .add_root_certificate(root)
        .build()
        .unwrap();
    let url = format!("{}?comp=list", endpoint(ports[0]));
    let answered = trusting.get(&url).send().await.unwrap();
    assert_eq!(
        answered.status(),
        403,
        "over HTTPS, and still asks for credentials"
    );
}
