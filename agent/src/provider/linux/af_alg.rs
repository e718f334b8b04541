//! AF_ALG sockets, with raw system calls that work from the static musl
//! agent on kernels back to 3.10: `socket(AF_ALG, SOCK_SEQPACKET)`, `bind` to a
//! type (`skcipher`, `aead`) and an algorithm or driver name, `setsockopt`
//! `ALG_SET_KEY` (and `ALG_SET_AEAD_AUTHSIZE`), `accept` for an operation
//! socket, then per message one `sendmsg` whose control messages carry
//! `ALG_SET_OP`, `ALG_SET_IV` (and `ALG_SET_AEAD_ASSOCLEN`) and one `read`.
//!
//! `algif_skcipher` exists since Linux 2.6.38, `algif_aead` since 4.1; before
//! 4.9 an AEAD's output leaves out the associated data, which the engine does
//! not use (its AEADs authenticate none), so both layouts read the same.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Which AF_ALG socket type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Skcipher,
    Aead,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Skcipher => "skcipher",
            Kind::Aead => "aead",
        }
    }

    /// The kernel option and module behind the type.
    fn module(self) -> (&'static str, &'static str) {
        match self {
            Kind::Skcipher => ("CONFIG_CRYPTO_USER_API_SKCIPHER", "algif_skcipher"),
            Kind::Aead => ("CONFIG_CRYPTO_USER_API_AEAD", "algif_aead"),
        }
    }
}

/// A socket bound to one algorithm: holds its key; each [`Op`] runs messages.
pub struct Transform {
    fd: OwnedFd,
    pub kind: Kind,
    pub name: String,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Why binding `kind`/`name` failed, in words an operator can act on.
pub fn explain(kind: Kind, name: &str, e: &io::Error) -> String {
    let (option, module) = kind.module();
    match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => "AF_ALG is not available (EAFNOSUPPORT): the kernel was built without \
             CONFIG_CRYPTO_USER_API, or its af_alg module is not loaded"
            .to_string(),
        Some(libc::ENOENT) => format!(
            "bind({}, {name}) failed (ENOENT): the kernel has no {name}, or no AF_ALG `{}` type ({option} missing, \
             or {module} not loaded; `aead` needs Linux 4.1)",
            kind.as_str(),
            kind.as_str()
        ),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("AF_ALG refused ({e}): a seccomp filter or security module forbids it")
        }
        _ => format!("AF_ALG {} {name}: {e}", kind.as_str()),
    }
}

impl Transform {
    /// `socket` + `bind` to `name` (an algorithm such as `gcm(aes)`, or a
    /// driver such as `cbc(aes-generic)`, which picks that implementation).
    pub fn bind(kind: Kind, name: &str) -> io::Result<Transform> {
        // SAFETY: plain system call; the descriptor is owned right after.
        let raw = check(unsafe { libc::socket(libc::AF_ALG, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = sockaddr(kind, name)?;
        // SAFETY: `addr` is a valid sockaddr_alg of the size passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_alg).cast(),
                std::mem::size_of::<libc::sockaddr_alg>() as libc::socklen_t,
            )
        })?;
        Ok(Transform {
            fd,
            kind,
            name: name.to_string(),
        })
    }

    /// `ALG_SET_KEY`. Refused (EBUSY) while an operation socket is open on
    /// newer kernels: re-keying closes them first.
    pub fn set_key(&self, key: &[u8]) -> io::Result<()> {
        // SAFETY: `key` is valid for its length.
        check(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_ALG,
                libc::ALG_SET_KEY,
                key.as_ptr().cast(),
                key.len() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// `ALG_SET_AEAD_AUTHSIZE`: the tag length, passed as the option length.
    pub fn set_tag_len(&self, len: usize) -> io::Result<()> {
        // SAFETY: the kernel reads no option value for this option, only its length.
        check(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_ALG,
                libc::ALG_SET_AEAD_AUTHSIZE,
                std::ptr::null(),
                len as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// `accept`: a socket for messages under the current key.
    pub fn op(&self) -> io::Result<Op> {
        // SAFETY: plain system call; no address is asked for.
        let raw = check(unsafe { libc::accept(self.fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut()) })?;
        // SAFETY: `raw` is a new descriptor nothing else owns.
        Ok(Op {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
            control: Control::default(),
        })
    }
}

fn sockaddr(kind: Kind, name: &str) -> io::Result<libc::sockaddr_alg> {
    // SAFETY: sockaddr_alg is plain data; all zero is a valid value.
    let mut addr: libc::sockaddr_alg = unsafe { std::mem::zeroed() };
    addr.salg_family = libc::AF_ALG as libc::sa_family_t;
    let (ty, n) = (kind.as_str().as_bytes(), name.as_bytes());
    // Both fields are NUL-terminated in the kernel's copy.
    if n.len() >= addr.salg_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is too long for AF_ALG"),
        ));
    }
    addr.salg_type[..ty.len()].copy_from_slice(ty);
    addr.salg_name[..n.len()].copy_from_slice(n);
    Ok(addr)
}

/// Room for the three control messages: the operation, an IV of up to 16
/// bytes, the associated-data length.
const CONTROL_BYTES: usize = 128;

/// The control messages of one `sendmsg`, built in place (no allocation per message).
pub struct Control {
    buf: [u64; CONTROL_BYTES / 8],
    len: usize,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            buf: [0; CONTROL_BYTES / 8],
            len: 0,
        }
    }
}

impl Control {
    /// Writes `ALG_SET_OP`, `ALG_SET_IV` (`struct af_alg_iv`: a 32-bit length,
    /// then the IV) and, for AEADs, `ALG_SET_AEAD_ASSOCLEN`.
    pub fn fill(&mut self, encrypt: bool, iv: &[u8], assoclen: Option<u32>) {
        let op = if encrypt {
            libc::ALG_OP_ENCRYPT
        } else {
            libc::ALG_OP_DECRYPT
        } as u32;
        let mut iv_data = [0u8; 4 + 16];
        iv_data[..4].copy_from_slice(&(iv.len() as u32).to_ne_bytes());
        iv_data[4..4 + iv.len()].copy_from_slice(iv);
        let bytes = self.bytes_mut();
        bytes.fill(0);
        let mut at = 0;
        at += put(&mut bytes[at..], libc::ALG_SET_OP, &op.to_ne_bytes());
        at += put(&mut bytes[at..], libc::ALG_SET_IV, &iv_data[..4 + iv.len()]);
        if let Some(n) = assoclen {
            at += put(&mut bytes[at..], libc::ALG_SET_AEAD_ASSOCLEN, &n.to_ne_bytes());
        }
        self.len = at;
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: u64s are 8 plain bytes each; the slice covers exactly the array.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast(), CONTROL_BYTES) }
    }

    /// The bytes written by the last [`Control::fill`].
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: as in bytes_mut, read-only.
        let all = unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), CONTROL_BYTES) };
        &all[..self.len]
    }
}

/// Writes one `cmsghdr` (level `SOL_ALG`) with `data` at the start of `out`;
/// returns the bytes it takes, padding included (`CMSG_SPACE`).
fn put(out: &mut [u8], kind: libc::c_int, data: &[u8]) -> usize {
    // SAFETY: CMSG_LEN and CMSG_SPACE are arithmetic on their argument.
    let (len, space) = unsafe {
        (
            libc::CMSG_LEN(data.len() as u32) as usize,
            libc::CMSG_SPACE(data.len() as u32) as usize,
        )
    };
    let header = len - data.len();
    // SAFETY: cmsghdr is plain data; all zero is a valid value.
    let mut h: libc::cmsghdr = unsafe { std::mem::zeroed() };
    h.cmsg_len = len as _;
    h.cmsg_level = libc::SOL_ALG;
    h.cmsg_type = kind;
    // SAFETY: reading the header's bytes; `header` is size_of::<cmsghdr>() after alignment.
    let raw = unsafe {
        std::slice::from_raw_parts(
            (&h as *const libc::cmsghdr).cast::<u8>(),
            std::mem::size_of::<libc::cmsghdr>(),
        )
    };
    out[..raw.len()].copy_from_slice(raw);
    out[header..header + data.len()].copy_from_slice(data);
    space
}

/// An operation socket: one message at a time.
pub struct Op {
    fd: OwnedFd,
    control: Control,
}

impl Op {
    /// Encrypts or decrypts `input` into `output` with `iv`; an AEAD gives
    /// `assoclen`. Returns the bytes read. A tag that does not verify is
    /// `EBADMSG`.
    #[inline]
    pub fn crypt(
        &mut self,
        encrypt: bool,
        iv: &[u8],
        assoclen: Option<u32>,
        input: &[u8],
        output: &mut [u8],
    ) -> io::Result<usize> {
        self.control.fill(encrypt, iv, assoclen);
        let mut iov = libc::iovec {
            iov_base: input.as_ptr() as *mut libc::c_void,
            iov_len: input.len(),
        };
        // SAFETY: msghdr is plain data; all zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let control = self.control.bytes();
        msg.msg_control = control.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len() as _;
        // SAFETY: every pointer in `msg` is valid for its length during the call,
        // and the kernel only reads them.
        let sent = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &msg, 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `output` is valid for writes of its length.
        let read = unsafe { libc::read(self.fd.as_raw_fd(), output.as_mut_ptr().cast(), output.len()) };
        if read < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(read as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn control_messages_carry_operation_iv_and_assoclen() {
        let mut c = Control::default();
        let iv: Vec<u8> = (0..12).collect();
        c.fill(true, &iv, Some(0));
        let b = c.bytes();
        let h = std::mem::size_of::<libc::cmsghdr>();
        // ALG_SET_OP: a header and a 32-bit operation, padded to the header's alignment.
        let op_space = unsafe { libc::CMSG_SPACE(4) } as usize;
        assert_eq!(b.len(), op_space + unsafe { libc::CMSG_SPACE(16) } as usize + op_space);
        let level_type = |at: usize| (u32_at(b, at + h - 8) as i32, u32_at(b, at + h - 4) as i32);
        assert_eq!(level_type(0), (libc::SOL_ALG, libc::ALG_SET_OP));
        assert_eq!(u32_at(b, h), libc::ALG_OP_ENCRYPT as u32);
        // ALG_SET_IV: struct af_alg_iv { u32 ivlen; u8 iv[]; }.
        assert_eq!(level_type(op_space), (libc::SOL_ALG, libc::ALG_SET_IV));
        assert_eq!(u32_at(b, op_space + h), 12);
        assert_eq!(&b[op_space + h + 4..op_space + h + 16], &iv[..]);
        let cmsg_len = usize::from_ne_bytes(b[op_space..op_space + std::mem::size_of::<usize>()].try_into().unwrap());
        assert_eq!(cmsg_len, unsafe { libc::CMSG_LEN(16) } as usize);
        // A skcipher message has no associated-data length.
        c.fill(false, &[7u8; 16], None);
        let b = c.bytes();
        assert_eq!(b.len(), op_space + unsafe { libc::CMSG_SPACE(20) } as usize);
        assert_eq!(u32_at(b, h), libc::ALG_OP_DECRYPT as u32);
    }

    #[test]
    fn a_kernel_without_af_alg_says_which_option_is_missing() {
        let e = io::Error::from_raw_os_error(libc::EAFNOSUPPORT);
        assert!(explain(Kind::Skcipher, "cbc(aes)", &e).contains("CONFIG_CRYPTO_USER_API"));
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        let why = explain(Kind::Aead, "gcm(aes)", &e);
        assert!(
            why.contains("algif_aead") && why.contains("CONFIG_CRYPTO_USER_API_AEAD"),
            "{why}"
        );
        assert!(sockaddr(Kind::Aead, &"x".repeat(64)).is_err());
    }

    /// On a kernel with AF_ALG this encrypts for real (SP 800-38A F.5.1); where
    /// the kernel lacks it (the development VM), it checks the refusal says why.
    #[test]
    fn ctr_aes_through_af_alg_or_the_reason_it_is_missing() {
        match Transform::bind(Kind::Skcipher, "ctr(aes)") {
            Ok(t) => {
                t.set_key(&hex("2b7e151628aed2a6abf7158809cf4f3c")).unwrap();
                let mut op = t.op().unwrap();
                let mut out = [0u8; 16];
                let n = op
                    .crypt(
                        true,
                        &hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"),
                        None,
                        &hex("6bc1bee22e409f96e93d7e117393172a"),
                        &mut out,
                    )
                    .unwrap();
                assert_eq!((n, out.to_vec()), (16, hex("874d6191b620e3261bef6864990db6ce")));
            }
            Err(e) => {
                let why = explain(Kind::Skcipher, "ctr(aes)", &e);
                assert!(why.contains("CONFIG_CRYPTO_USER_API"), "{why}");
                eprintln!("AF_ALG not exercised here: {why}");
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
