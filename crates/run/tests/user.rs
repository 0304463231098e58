//! `pktsched run --user`: once its sockets are open the daemon runs as the
//! given user with no capability, and still answers on its control socket.
//! The daemon switches the whole process, so it runs in a child process
//! (this test binary again, with an environment variable saying so), in
//! namespaces of its own (prefix `vc-`). Needs root; skipped otherwise.

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use untested::skipped;

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::control::{self, Request};
use pktsched_run::daemon::{self, DaemonEvents, DaemonOptions};

/// Set in the child: `<namespace>\n<config path>`.
const CHILD: &str = "PKTSCHED_VC_USER_CHILD";
const TEST: &str = "the_daemon_runs_as_the_user_with_no_capability";

struct Log;
impl DaemonEvents for Log {
    fn log(&mut self, line: &str) {
        eprintln!("child: {line}");
    }
}

/// The child: the daemon as `nobody` for a few seconds.
fn child(spec: &str) {
    let (ns, config) = spec.split_once('\n').expect("child spec");
    let opts = DaemonOptions {
        config: PathBuf::from(config),
        duration: Some(Duration::from_secs(6)),
        keep_privileges: false,
        user: Some("nobody".into()),
        threads: Default::default(),
    };
    let stop = AtomicBool::new(false);
    in_namespace(ns, || daemon::run(&opts, &stop, &|| false, false, &mut Log))
        .expect("namespace")
        .expect("daemon");
}

/// The `Uid:`/`Gid:`/`CapEff:` line of `pid`'s status, split in fields.
fn status_fields(pid: u32, key: &str) -> Vec<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l.split_whitespace().skip(1).map(String::from).collect())
        .unwrap_or_default()
}

/// Waits (a bound on a hang, not a timing goal) until `f` holds or the
/// child ended.
fn wait_for(what: &str, child: &mut Child, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the daemon ended ({st}) before {what}");
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn config(dir: &Path) -> String {
    format!(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"packet\"\n\n\
         [control]\nsocket = \"{}/s.sock\"\n\n\
         [[class]]\nname = \"a\"\ndefault = true\n",
        dir.display()
    )
}

#[test]
fn the_daemon_runs_as_the_user_with_no_capability() {
    if let Ok(spec) = std::env::var(CHILD) {
        return child(&spec);
    }
    if !is_root() {
        skipped("needs root to create network namespaces and switch users");
        return;
    }
    let topo = Topology::line("vc-user-").expect("topology");
    let dir = std::env::temp_dir().join(format!("vc-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // The user reads nothing here after the switch; the directory must
    // let it reach its socket.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path = dir.join("c.toml");
    std::fs::write(&path, config(&dir)).expect("config");
    let sock = dir.join("s.sock");
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{}\n{}", topo.dut_ns, path.display()))
        .spawn()
        .expect("spawn the daemon");
    let pid = child.id();
    wait_for("the switch to nobody", &mut child, || {
        status_fields(pid, "Uid:") == ["65534"; 4]
    });
    let gid = status_fields(pid, "Gid:");
    let cap_eff = status_fields(pid, "CapEff:");
    let cap_prm = status_fields(pid, "CapPrm:");
    let groups = status_fields(pid, "Groups:");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&sock).expect("socket"));
    // Still serving: the control socket answers the user-owned daemon.
    let answer = control::request(&sock, Request::Stats).expect("stats");
    let status = child.wait().expect("wait");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(gid, ["65534"; 4]);
    assert_eq!(groups, ["65534"]);
    assert_eq!(cap_eff, ["0000000000000000"]);
    assert_eq!(cap_prm, ["0000000000000000"]);
    assert_eq!(owner, 65534, "the control socket is the user's");
    assert!(answer.contains("class a"), "{answer}");
    assert!(status.success(), "the daemon ended with {status}");
}
