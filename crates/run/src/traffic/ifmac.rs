//! An interface's MAC address from the kernel (`SIOCGIFHWADDR`), in the
//! calling thread's network namespace (sysfs would show the namespace it
//! was mounted in, which a thread that only switched namespaces does not
//! share).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The hardware address of `device`.
pub(crate) fn mac_of(device: &str) -> std::io::Result<[u8; 6]> {
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
    // SAFETY: SIOCGIFHWADDR reads the NUL-terminated name and writes the
    // address into `req`, which lives across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("{device}: no such interface ({e})"),
        ));
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds ifru_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::mac_of;

    #[test]
    fn loopback_has_the_zero_address_and_a_missing_device_is_named() {
        assert_eq!(mac_of("lo").expect("lo"), [0; 6]);
        let e = mac_of("pscnodev0").expect_err("missing");
        assert!(e.to_string().contains("pscnodev0"), "{e}");
        assert!(mac_of("a/very/long/interface/name").is_err());
    }
}
