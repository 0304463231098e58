//! The `bpf(2)` commands used here: map create / update / lookup, program
//! load (with the verifier's log on failure), XDP attach through a link,
//! and test runs. Each command's part of `union bpf_attr` is a `repr(C)`
//! struct of its own, passed with its own size (the kernel zero-extends a
//! shorter attribute).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::BpfError;
use super::insn::{Insn, encode_all};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_F_STRICT_ALIGNMENT`: the verifier checks every packet access's
/// alignment as a kernel without efficient unaligned access does (taking
/// the packet to start 2 bytes past an aligned address, `NET_IP_ALIGN`).
pub const STRICT_ALIGNMENT: u32 = 1;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` attach type.
const ATTACH_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`, `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Bytes of verifier log kept on a failed load.
const LOG_SIZE: usize = 1 << 20;

/// Kinds of map.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// `BPF_MAP_TYPE_ARRAY`: fixed slots, zeroed.
    Array = 2,
    /// `BPF_MAP_TYPE_XSKMAP`: AF_XDP sockets by key (u32 → socket fd).
    Xsk = 17,
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The value buffer of one map element command: read by an update, written
/// by a lookup (the kernel writes through the address it is given).
enum ElementValue<'a> {
    Write(&'a [u8]),
    Read(&'a mut [u8]),
}

#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)`.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable repr(C) struct of the size passed;
    // every pointer inside it was set by the caller to live buffers of the
    // sizes given beside them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(rc: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel just returned this new descriptor, owned by no one.
    unsafe { OwnedFd::from_raw_fd(rc as RawFd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out
        .iter_mut()
        .zip(
            name.bytes()
                .filter(|b| b.is_ascii_alphanumeric() || *b == b'_'),
        )
        .take(15)
    {
        *o = b;
    }
    out
}

/// A BPF map, closed on drop.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    kind: MapKind,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
}

impl Map {
    /// Creates a map (`name`: up to 15 of its ASCII letters, digits and
    /// `_` are kept, as the kernel shows it).
    pub fn create(
        kind: MapKind,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        name: &str,
    ) -> Result<Map, BpfError> {
        let mut attr = MapCreateAttr {
            map_type: kind as u32,
            key_size,
            value_size,
            max_entries,
            map_name: name16(name),
            ..MapCreateAttr::default()
        };
        let rc = bpf(BPF_MAP_CREATE, &mut attr).map_err(|e| BpfError::Sys {
            call: "BPF_MAP_CREATE",
            what: format!("{kind:?} map {name:?} of {max_entries} entries"),
            source: e,
        })?;
        Ok(Map {
            fd: owned(rc),
            kind,
            key_size,
            value_size,
            max_entries,
        })
    }

    /// An XSKMAP of `max_entries` sockets (keys `0..max_entries`).
    pub fn xsk(max_entries: u32, name: &str) -> Result<Map, BpfError> {
        Map::create(MapKind::Xsk, 4, 4, max_entries, name)
    }

    /// The map's descriptor (for [`super::insn::Asm::ld_map_fd`]).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Entries.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    fn check(&self, key: &[u8], value: &[u8]) -> Result<(), BpfError> {
        if key.len() != self.key_size as usize || value.len() != self.value_size as usize {
            return Err(BpfError::Invalid(format!(
                "{:?} map: key of {} and value of {} bytes given, the map has {} and {}",
                self.kind,
                key.len(),
                value.len(),
                self.key_size,
                self.value_size
            )));
        }
        Ok(())
    }

    /// Sets `key` to `value` (for an XSKMAP the value is a socket's fd).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<(), BpfError> {
        self.element_call(key, ElementValue::Write(value))
    }

    /// Reads `key` into `value`.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> Result<(), BpfError> {
        self.element_call(key, ElementValue::Read(value))
    }

    /// One element command on `key`: the buffers' lengths are checked
    /// against the map's here, next to the call that uses them.
    fn element_call(&self, key: &[u8], value: ElementValue<'_>) -> Result<(), BpfError> {
        let (cmd, call, value_addr) = match value {
            ElementValue::Write(v) => {
                self.check(key, v)?;
                (
                    BPF_MAP_UPDATE_ELEM,
                    "BPF_MAP_UPDATE_ELEM",
                    v.as_ptr() as u64,
                )
            }
            ElementValue::Read(v) => {
                self.check(key, v)?;
                (
                    BPF_MAP_LOOKUP_ELEM,
                    "BPF_MAP_LOOKUP_ELEM",
                    v.as_mut_ptr() as u64,
                )
            }
        };
        let mut attr = MapElemAttr {
            map_fd: self.fd() as u32,
            _pad: 0,
            key: key.as_ptr() as u64,
            value: value_addr,
            flags: 0,
        };
        bpf(cmd, &mut attr).map_err(|e| BpfError::Sys {
            call,
            what: format!("{:?} map key {key:?}", self.kind),
            source: e,
        })?;
        Ok(())
    }
}

/// A loaded XDP program, unloaded when its descriptor and every link
/// to it are closed.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    name: String,
}

/// Most runs [`Program::test_run_repeated`] asks of the kernel at once.
pub const MAX_TEST_REPEAT: u32 = 100_000_000;

/// What a test run returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (`XDP_PASS` = 2, `XDP_REDIRECT` = 4, ...).
    pub retval: u32,
    /// Bytes written to the output (metadata, then the frame).
    pub out_len: usize,
}

fn load(attr: &mut ProgLoadAttr) -> io::Result<libc::c_long> {
    loop {
        match bpf(BPF_PROG_LOAD, attr) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
            other => return other,
        }
    }
}

impl Program {
    /// Loads `insns` as an XDP program. On failure the error carries the
    /// verifier's log (the load is repeated with the log on).
    pub fn load_xdp(name: &str, insns: &[Insn], license: &str) -> Result<Program, BpfError> {
        Self::load_xdp_flags(name, insns, license, 0)
    }

    /// [`Program::load_xdp`] with the load's `prog_flags` (e.g.
    /// [`STRICT_ALIGNMENT`]).
    pub fn load_xdp_flags(
        name: &str,
        insns: &[Insn],
        license: &str,
        flags: u32,
    ) -> Result<Program, BpfError> {
        let code = encode_all(insns);
        let lic = CString::new(license)
            .map_err(|_| BpfError::Invalid(format!("license {license:?} contains a NUL")))?;
        let mut attr = ProgLoadAttr {
            prog_type: PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: code.as_ptr() as u64,
            license: lic.as_ptr() as u64,
            prog_name: name16(name),
            expected_attach_type: ATTACH_XDP,
            prog_flags: flags,
            ..ProgLoadAttr::default()
        };
        match load(&mut attr) {
            Ok(rc) => Ok(Program {
                fd: owned(rc),
                name: name.to_string(),
            }),
            Err(first) => {
                let mut log = vec![0u8; LOG_SIZE];
                attr.log_level = 1;
                attr.log_size = LOG_SIZE as u32;
                attr.log_buf = log.as_mut_ptr() as u64;
                if let Ok(rc) = load(&mut attr) {
                    // Loaded with the log on (a transient failure): keep it.
                    return Ok(Program {
                        fd: owned(rc),
                        name: name.to_string(),
                    });
                }
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(BpfError::Verifier {
                    program: name.to_string(),
                    source: first,
                    log: String::from_utf8_lossy(&log[..end]).into_owned(),
                })
            }
        }
    }

    /// The program's descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`, at least 14
    /// bytes), writing the frame as it left (with any metadata in front)
    /// into `out`.
    pub fn test_run(&self, frame: &[u8], out: &mut [u8]) -> Result<TestRun, BpfError> {
        self.test_run_repeated(frame, out, 1).map(|(run, _)| run)
    }

    /// Runs the program `repeat` times (1 ..= [`MAX_TEST_REPEAT`]) on
    /// `frame` in the kernel, back to back on one buffer, and returns the
    /// last run with the kernel's mean duration per run in nanoseconds
    /// (its own clock around the loop: the program's cost plus the loop's).
    /// The runs share the buffer, so metadata a program reserves stays
    /// reserved: once it reaches the kernel's limit `bpf_xdp_adjust_meta`
    /// fails, and most of the timing is of that path. `out` needs room for
    /// the frame and that metadata (the frame's length + 256 is enough).
    pub fn test_run_repeated(
        &self,
        frame: &[u8],
        out: &mut [u8],
        repeat: u32,
    ) -> Result<(TestRun, u32), BpfError> {
        if !(1..=MAX_TEST_REPEAT).contains(&repeat) {
            return Err(BpfError::Invalid(format!(
                "test run repeat {repeat}: allowed 1 ..= {MAX_TEST_REPEAT}"
            )));
        }
        let mut attr = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat,
            ..TestRunAttr::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr).map_err(|e| BpfError::Sys {
            call: "BPF_PROG_TEST_RUN",
            what: format!(
                "program {} on a {}-byte frame, {repeat} runs",
                self.name,
                frame.len()
            ),
            source: e,
        })?;
        let run = TestRun {
            retval: attr.retval,
            out_len: (attr.data_size_out as usize).min(out.len()),
        };
        Ok((run, attr.duration))
    }
}

/// How an XDP program is attached.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`): before an skb is built.
    Native,
    /// Generic (`XDP_FLAGS_SKB_MODE`): after the skb is built; any device.
    Generic,
}

/// An XDP program attached to an interface; detached when dropped (the
/// link's descriptor closes).
#[derive(Debug)]
pub struct XdpLink {
    _fd: OwnedFd,
    /// How it is attached.
    pub mode: AttachMode,
}

/// Attaches `prog` to interface `ifindex` in `mode` (`BPF_LINK_CREATE`).
pub fn attach_xdp(prog: &Program, ifindex: u32, mode: AttachMode) -> Result<XdpLink, BpfError> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.fd() as u32,
        target_ifindex: ifindex,
        attach_type: ATTACH_XDP,
        flags: match mode {
            AttachMode::Native => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        },
    };
    let rc = bpf(BPF_LINK_CREATE, &mut attr).map_err(|e| BpfError::Sys {
        call: "BPF_LINK_CREATE",
        what: format!(
            "attach {} to interface {ifindex} in {mode:?} mode",
            prog.name
        ),
        source: e,
    })?;
    Ok(XdpLink {
        _fd: owned(rc),
        mode,
    })
}

/// Attaches natively, else generically; the reason native failed comes
/// with a generic attachment.
pub fn attach_xdp_best(
    prog: &Program,
    ifindex: u32,
) -> Result<(XdpLink, Option<String>), BpfError> {
    match attach_xdp(prog, ifindex, AttachMode::Native) {
        Ok(l) => Ok((l, None)),
        Err(native) => {
            let l = attach_xdp(prog, ifindex, AttachMode::Generic)?;
            Ok((
                l,
                Some(format!("native XDP refused ({native}); generic (SKB) mode")),
            ))
        }
    }
}
