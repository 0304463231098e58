//! An interface's MAC address (`SIOCGIFHWADDR`) and whether it merges
//! received frames (GRO, LRO: `SIOCETHTOOL`), from the kernel, in the
//! calling thread's network namespace (sysfs would show the namespace it
//! was mounted in, which a thread that only switched namespaces does not
//! share).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A datagram socket to ask about interfaces through, and an `ifreq`
/// naming `device`.
fn request(device: &str) -> std::io::Result<(OwnedFd, libc::ifreq)> {
    let name = device.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(std::io::Error::other(format!(
            "{device:?}: allowed an interface name of 1 to 15 bytes"
        )));
    }
    // SAFETY: plain socket(2) call; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data; zero is a valid value before filling.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    Ok((fd, req))
}

/// The error of a failed interface ioctl `what`, naming the device.
fn failed(device: &str, what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    let text = match e.raw_os_error() {
        Some(libc::ENODEV) => format!("{device}: no such interface ({e})"),
        _ => format!("{device}: {what} failed ({e})"),
    };
    std::io::Error::new(e.kind(), text)
}

/// The hardware address of `device`.
pub(crate) fn mac_of(device: &str) -> std::io::Result<[u8; 6]> {
    let (fd, mut req) = request(device)?;
    // SAFETY: SIOCGIFHWADDR reads the NUL-terminated name and writes the
    // address into `req`, which lives across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    if rc != 0 {
        return Err(failed(device, "SIOCGIFHWADDR"));
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds ifru_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(mac)
}

/// `struct ethtool_value` of `<linux/ethtool.h>`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}
/// `ETHTOOL_GGRO`, `ETHTOOL_GFLAGS` and `ETH_FLAG_LRO`.
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETH_FLAG_LRO: u32 = 1 << 15;

/// One `SIOCETHTOOL` get of a 32-bit value.
fn ethtool_get(device: &str, cmd: u32) -> std::io::Result<u32> {
    let (fd, mut req) = request(device)?;
    let mut value = EthtoolValue { cmd, data: 0 };
    req.ifr_ifru.ifru_data = (&raw mut value).cast();
    // SAFETY: SIOCETHTOOL reads the name and the command from `value`,
    // through the pointer in `req`, and writes `value.data`; both live
    // across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if rc != 0 {
        return Err(failed(device, "SIOCETHTOOL"));
    }
    Ok(value.data)
}

/// Which of GRO and LRO `device` has on (`"gro"`, `"lro"`): frames it
/// merges reach an AF_PACKET ring longer than a slot.
pub(crate) fn merging_offloads(device: &str) -> std::io::Result<Vec<&'static str>> {
    let mut on = Vec::new();
    if ethtool_get(device, ETHTOOL_GGRO)? != 0 {
        on.push("gro");
    }
    // Not every driver answers ETHTOOL_GFLAGS: no answer is no LRO.
    if ethtool_get(device, ETHTOOL_GFLAGS).is_ok_and(|f| f & ETH_FLAG_LRO != 0) {
        on.push("lro");
    }
    Ok(on)
}

#[cfg(test)]
mod tests {
    use super::{mac_of, merging_offloads};

    #[test]
    fn merging_offloads_agree_with_ethtool() {
        let got = merging_offloads("lo").expect("lo");
        let e = merging_offloads("pscnodev0").expect_err("missing");
        assert!(
            e.to_string().contains("pscnodev0: no such interface"),
            "{e}"
        );
        // ethtool's own reading (ci/deps.sh installs the tool).
        let out = std::process::Command::new("ethtool")
            .args(["-k", "lo"])
            .output()
            .expect("ethtool (ci/deps.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        let on = |key: &str| {
            text.lines()
                .any(|l| l.starts_with(key) && l[key.len()..].trim_start().starts_with("on"))
        };
        assert_eq!(
            got.contains(&"gro"),
            on("generic-receive-offload:"),
            "{text}"
        );
        assert_eq!(got.contains(&"lro"), on("large-receive-offload:"), "{text}");
    }

    #[test]
    fn loopback_has_the_zero_address_and_a_missing_device_is_named() {
        assert_eq!(mac_of("lo").expect("lo"), [0; 6]);
        let e = mac_of("pscnodev0").expect_err("missing");
        assert!(
            e.to_string().contains("pscnodev0: no such interface"),
            "{e}"
        );
        assert!(mac_of("a/very/long/interface/name").is_err());
    }
}
