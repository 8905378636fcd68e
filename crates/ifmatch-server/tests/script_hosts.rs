//! The processes Cosmos scripts' engines run in (`ifmatch script-host`), driven as the server
//! drives them, over their JSON lines.

use ifmatch_cosmos::script::Engines;
use ifmatch_server::script_hosts::ScriptHosts;

const OPEN: &str = r#"{"Open":{"cycles":20000000,"memory":67108864}}"#;
const DONE: &str = r#"{"Ok":"Done"}"#;

/// A run whose script nests an array 100,000 deep and makes it a string: the engine's native
/// recursion overflows its stack.
const OVERFLOW: &str = r#"{"Step":{"Start":{"source":"function f() { var a = []; for (var i = 0; i < 100000; i++) { a = [a]; } return String(a).length; }","arguments":[],"link":"dbs/d/colls/c","request":null,"response":null,"operation":""}}}"#;

/// This process's children that are script hosts.
fn hosts_running() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent is the fourth field, after the name in parentheses.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split(' ').nth(2));
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.starts_with(" Z"));
        if parent == Some(me.as_str()) && !zombie && command(&entry.path()).contains("script-host")
        {
            found.push(pid);
        }
    }
    found
}

/// A process's arguments. A spawn returns once the child has let go of this process's memory
/// in its `execve`, before the kernel has set the new program's arguments up: until then they
/// read empty (seen in CI: a process just started not counted), so an empty read is read again.
fn command(process: &std::path::Path) -> String {
    for _ in 0..1000 {
        match std::fs::read(process.join("cmdline")) {
            Ok(read) if read.is_empty() => std::thread::sleep(std::time::Duration::from_millis(1)),
            Ok(read) => return String::from_utf8_lossy(&read).into_owned(),
            Err(_) => break,
        }
    }
    String::new()
}

/// One test, as it counts and kills this process's children: a process that ends in the
/// middle of a step fails that step and no later one; one that ended while idle is passed
/// over; two idle ones are kept.
#[test]
fn script_hosts_end_alone_and_are_replaced() {
    let hosts = ScriptHosts::new(env!("CARGO_BIN_EXE_ifmatch").into());

    let mut host = hosts.host().unwrap();
    assert_eq!(host.exchange(OPEN).unwrap(), DONE);
    let ended = host.exchange(OVERFLOW).unwrap_err().to_string();
    assert!(ended.contains("SIGABRT"), "{ended}");
    assert!(
        host.exchange(OPEN).is_err(),
        "an ended process answers no more"
    );
    drop(host);
    assert!(hosts_running().is_empty(), "{:?}", hosts_running());

    let mut host = hosts.host().unwrap();
    assert_eq!(host.exchange(OPEN).unwrap(), DONE, "a new process");
    drop(host);
    let idle = hosts_running();
    assert_eq!(idle.len(), 1, "kept idle");
    std::process::Command::new("kill")
        .args(["-9", &idle[0].to_string()])
        .status()
        .unwrap();
    // Ended, waiting to be reaped: its first thread a zombie and its others gone (until
    // then the kernel does not give it to a wait; the server's first step to it would fail,
    // and the run would be opened in another process).
    let ended = || {
        let proc = format!("/proc/{}", idle[0]);
        let stat = std::fs::read_to_string(format!("{proc}/stat")).unwrap();
        let threads = std::fs::read_dir(format!("{proc}/task")).unwrap().count();
        threads == 1
            && stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.starts_with(" Z"))
    };
    while !ended() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut host = hosts.host().unwrap();
    assert_eq!(
        host.exchange(OPEN).unwrap(),
        DONE,
        "the killed one passed over"
    );
    assert_ne!(hosts_running(), idle);
    drop(host);

    let taken: Vec<_> = (0..3).map(|_| hosts.host().unwrap()).collect();
    assert_eq!(hosts_running().len(), 3);
    drop(taken);
    assert_eq!(hosts_running().len(), 2, "two kept idle, the third ended");
}
