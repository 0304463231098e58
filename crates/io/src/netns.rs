//! Test topologies in network namespaces of their own, for tests, `pktsched
//! demo` and benchmarks (the data path never shells out: this module does,
//! to `ip` and `ethtool`, only to build and remove topologies).
//!
//! [`Topology::line`] builds
//!
//! ```text
//!  <p>gen: g0 198.18.0.1/24 ── d0 <p>dut d1 ── s0 198.18.0.2/24 :<p>sink
//! ```
//!
//! with namespace names unique to the process and call, offloads off on
//! every end (a userspace bump in the wire forwards frames as they are:
//! checksums must be complete and frames no larger than the MTU), and
//! removes all of it when dropped — also when a test panics.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// `true` if the process runs as root (tests that need namespaces skip
/// with a message otherwise).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Capability bits in `/proc/self/status`'s `CapEff`.
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;

/// Why this process cannot build topologies, or `None` if it can: it needs
/// CAP_SYS_ADMIN (`ip netns add` mounts, `setns`), CAP_NET_ADMIN (veths,
/// addresses, promiscuous mode), CAP_NET_RAW (AF_PACKET) and the `ip` and
/// `ethtool` programs. Tests skip with this message (CI runs as root and
/// runs them).
pub fn missing_privileges() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let missing: Vec<&str> = [
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_NET_RAW, "CAP_NET_RAW"),
    ]
    .into_iter()
    .filter(|&(bit, _)| caps & (1 << bit) == 0)
    .map(|(_, name)| name)
    .collect();
    if !missing.is_empty() {
        return Some(format!(
            "needs {} to build network namespaces and veths (run as root)",
            missing.join(", ")
        ));
    }
    for (prog, version) in [("ip", "-V"), ("ethtool", "--version")] {
        let found = Command::new(prog)
            .arg(version)
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("needs the `{prog}` program (iproute2 / ethtool)"));
        }
    }
    None
}

fn run(args: &[&str]) -> io::Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run {}: {e}", args[0])))?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Runs `f` on a new thread inside network namespace `ns` (as created by
/// `ip netns add`) and returns its result. Sockets opened by `f` keep
/// that namespace wherever they are used afterwards.
pub fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let file = File::open(format!("/run/netns/{ns}"))?;
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: setns on a namespace fd switches only this thread's
            // network namespace; the fd is valid for the call.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("the thread in the namespace panicked"))?
    })
}

/// The namespaces of a line topology; removed on drop.
#[derive(Debug)]
pub struct Topology {
    /// Namespace of the generator (g0).
    pub gen_ns: String,
    /// Namespace of the device under test (d0, d1).
    pub dut_ns: String,
    /// Namespace of the sink (s0).
    pub sink_ns: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Builds the line topology with namespace names `<prefix><pid>-<n>-gen`
    /// etc. Needs root, `ip` and `ethtool`.
    pub fn line(prefix: &str) -> io::Result<Topology> {
        let id = format!(
            "{prefix}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let t = Topology {
            gen_ns: format!("{id}-gen"),
            dut_ns: format!("{id}-dut"),
            sink_ns: format!("{id}-sink"),
        };
        // From here on, Drop removes whatever was made.
        for ns in [&t.gen_ns, &t.dut_ns, &t.sink_ns] {
            run(&["ip", "netns", "add", ns])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        run(&[
            "ip", "link", "add", "g0", "netns", &t.gen_ns, "type", "veth", "peer", "name", "d0",
            "netns", &t.dut_ns,
        ])?;
        run(&[
            "ip", "link", "add", "d1", "netns", &t.dut_ns, "type", "veth", "peer", "name", "s0",
            "netns", &t.sink_ns,
        ])?;
        run(&[
            "ip",
            "-n",
            &t.gen_ns,
            "addr",
            "add",
            "198.18.0.1/24",
            "dev",
            "g0",
        ])?;
        run(&[
            "ip",
            "-n",
            &t.sink_ns,
            "addr",
            "add",
            "198.18.0.2/24",
            "dev",
            "s0",
        ])?;
        for (ns, dev) in [
            (&t.gen_ns, "g0"),
            (&t.dut_ns, "d0"),
            (&t.dut_ns, "d1"),
            (&t.sink_ns, "s0"),
        ] {
            run(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro",
                "off", "tx", "off", "rx", "off",
            ])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(t)
    }
}

impl Topology {
    /// The MAC address of `dev` in namespace `ns`.
    pub fn mac(ns: &str, dev: &str) -> io::Result<[u8; 6]> {
        let out = Command::new("ip")
            .args(["-n", ns, "-o", "link", "show", "dev", dev])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let word = text
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .ok_or_else(|| io::Error::other(format!("no MAC for {dev} in {ns}: {text}")))?;
        let mut mac = [0u8; 6];
        for (i, part) in word.split(':').enumerate().take(6) {
            mac[i] = u8::from_str_radix(part, 16).map_err(io::Error::other)?;
        }
        Ok(mac)
    }

    /// Static neighbour entries between g0 and s0, so traffic needs no ARP
    /// through the device under test (tests of a one-way forwarder).
    pub fn static_neighbours(&self) -> io::Result<()> {
        let fmt = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
        let s0 = fmt(Self::mac(&self.sink_ns, "s0")?);
        let g0 = fmt(Self::mac(&self.gen_ns, "g0")?);
        run(&[
            "ip",
            "-n",
            &self.gen_ns,
            "neigh",
            "replace",
            "198.18.0.2",
            "lladdr",
            &s0,
            "dev",
            "g0",
        ])?;
        run(&[
            "ip",
            "-n",
            &self.sink_ns,
            "neigh",
            "replace",
            "198.18.0.1",
            "lladdr",
            &g0,
            "dev",
            "s0",
        ])
    }
}

impl Topology {
    /// Turns IPv6 off in all three namespaces, so the kernels send no
    /// neighbour or router solicitations: every frame on the wire is the
    /// test's own (for tests that account for every frame).
    pub fn quiet(&self) -> io::Result<()> {
        for ns in [&self.gen_ns, &self.dut_ns, &self.sink_ns] {
            for scope in ["all", "default"] {
                run(&[
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{scope}.disable_ipv6=1"),
                ])?;
            }
        }
        Ok(())
    }

    /// Puts the receiving ends d0 and s0 into veth's NAPI mode (GRO on):
    /// their peers' transmissions then go through a 256-entry ring and a
    /// NAPI poll instead of being received in the sender's context, and a
    /// full ring pushes back on the sender (EAGAIN on an AF_PACKET TX
    /// ring's kick). Closer to a NIC; the mode the research notes measured
    /// with. `threaded`: the NAPI polls run in kernel threads of their own
    /// (`napi/d0-*`) rather than in the softirq of the sending CPU.
    pub fn napi(&self, threaded: bool) -> io::Result<()> {
        for (ns, dev) in [(&self.dut_ns, "d0"), (&self.sink_ns, "s0")] {
            run(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"])?;
            if threaded {
                let knob = format!("echo 1 > /sys/class/net/{dev}/threaded");
                run(&["ip", "netns", "exec", ns, "sh", "-c", &knob])?;
            }
        }
        Ok(())
    }

    /// A counter of `dev` in namespace `ns` from
    /// `/sys/class/net/DEV/statistics/NAME` (read through `ip netns exec`,
    /// which mounts that namespace's sysfs), e.g. `rx_dropped`.
    pub fn counter(ns: &str, dev: &str, name: &str) -> io::Result<u64> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat"])
            .arg(format!("/sys/class/net/{dev}/statistics/{name}"))
            .output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("{ns}/{dev} {name}: {e}")))
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.gen_ns, &self.dut_ns, &self.sink_ns] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

/// Removes the namespaces a killed process left behind: those named
/// `<prefix><pid>-...` (as [`Topology::line`] names them) whose process
/// no longer exists. Returns the names removed. [`Topology`]'s `Drop`
/// covers panics; this covers `SIGKILL` and the like.
pub fn remove_stale(prefix: &str) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in namespaces()? {
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        run(&["ip", "netns", "del", &name])?;
        removed.push(name);
    }
    Ok(removed)
}

/// Names of the network namespaces that exist now.
pub fn namespaces() -> io::Result<Vec<String>> {
    match std::fs::read_dir("/run/netns") {
        Ok(dir) => Ok(dir
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
