//! `stats` and `reload`: finding the control socket from a config, sockets
//! that are not sockets, daemons that answer with an error.

use crate::common::Scratch;
use crate::table::{Row, row, run_table};
use std::os::unix::fs::PermissionsExt;

/// `pktsched stats` / `reload --config`: a route config is told from a run
/// config and its control socket asked.
#[test]
fn stats_and_reload_find_the_route_socket() {
    const RT: &str = "[router]\ningress = \"rtnosuch0\"\negress = \"rtnosuch1\"\n[[class]]\nname = \"be\"\n[[route]]\nprefix = \"10.0.0.0/8\"\ndev = \"rtnosuch1\"\n[control]\nsocket = \"{dir}/rt-gone.sock\"\n";
    let with = |content: &'static str, args: &'static [&'static str], words| Row {
        files: Box::leak(Box::new([("c.toml", content)])),
        ..row(args, 2, words)
    };
    run_table(&[
        with(
            RT,
            &["stats", "--config", "{dir}/c.toml"],
            &["cannot reach pktsched", "rt-gone.sock"],
        ),
        with(
            RT,
            &["reload", "--config", "{dir}/c.toml"],
            &["cannot reach pktsched", "rt-gone.sock"],
        ),
        with(
            "[scheduler]\nkind = \"drr\"\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["c.toml", "neither", "[router]", "[link]"],
        ),
        with(
            "[router]\n[link]\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["both [router]", "[link]", "allowed one of them"],
        ),
        with(
            "[router\n",
            &["stats", "--config", "{dir}/c.toml"],
            &["c.toml", "not a TOML file"],
        ),
        with(
            "[router]\ningress = 7\n",
            &["stats", "--config", "{dir}/c.toml"],
            &[
                "c.toml:2:11",
                "`router.ingress = 7`",
                "a whole number",
                "allowed an interface name in quotes, e.g. \"eth0\"",
            ],
        ),
        row(
            &["stats", "--config", "/nonexistent/c.toml"],
            2,
            &["cannot read config"],
        ),
        // A config of the other daemon: named, with the command it is for.
        with(
            RT,
            &["run", "--config", "{dir}/c.toml"],
            &[
                "a `pktsched route` config",
                "allowed `pktsched route --config",
            ],
        ),
        with(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n[[class]]\nname = \"a\"\ndefault = true\nlimit = 5\n",
            &["route", "--check", "{dir}/c.toml"],
            &[
                "a `pktsched run` config",
                "`pktsched route --check` takes configs with [router]",
                "allowed `pktsched check",
            ],
        ),
        with(
            "[link]\n",
            &["route", "--config", "{dir}/c.toml"],
            &[
                "a `pktsched run` config",
                "`pktsched route` takes configs with [router]",
            ],
        ),
    ]);
}

/// Control sockets that are not sockets: named, never connected to.
#[test]
fn control_paths_that_are_not_sockets() {
    run_table(&[
        Row {
            files: &[("s.sock", "a regular file")],
            ..row(
                &["stats", "--socket", "{dir}/s.sock"],
                2,
                &["s.sock is a regular file, not a socket"],
            )
        },
        row(
            &["stats", "--socket", "/tmp"],
            2,
            &["/tmp is a directory, not a socket"],
        ),
        row(
            &["reload", "--socket", "/dev/null"],
            2,
            &["/dev/null is a device or other special file, not a socket"],
        ),
    ]);
}

/// A daemon that answers `error: …` or closes the connection without an
/// answer: `stats` and `reload` fail naming it instead of printing the
/// error text as their result with exit status 0 (scripts such as
/// `ingress-qos.sh` rely on the status).
#[test]
fn daemon_errors_fail_stats_and_reload() {
    use std::io::{BufRead, BufReader, Write};
    let scratch = Scratch::new("daemon-errors");
    let serve = |name: &str, answer: &'static str| -> &'static str {
        let path = scratch.path().join(name);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o600)).unwrap();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().map_while(Result::ok) {
                let mut line = String::new();
                let _ = BufReader::new(&conn).read_line(&mut line);
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        Box::leak(path.display().to_string().into_boxed_str())
    };
    let failing = serve("failing.sock", "error: the forwarding thread failed\n");
    let silent = serve("silent.sock", "");
    let mut rows = Vec::new();
    for args in [
        vec!["stats", "--socket", failing],
        vec!["stats", "--json", "--socket", failing],
        vec!["stats", "--prometheus", "--socket", failing],
    ] {
        rows.push(row(
            Box::leak(args.into_boxed_slice()),
            2,
            &["stats failed", "the forwarding thread failed"],
        ));
    }
    rows.push(row(
        Box::leak(Box::new(["reload", "--socket", failing])),
        2,
        &["reload refused", "the forwarding thread failed"],
    ));
    for command in ["stats", "reload"] {
        rows.push(row(
            Box::leak(Box::new([command, "--socket", silent])),
            2,
            &[
                "no answer from pktsched on",
                "silent.sock",
                "closed the connection",
            ],
        ));
    }
    run_table(&rows);
}
