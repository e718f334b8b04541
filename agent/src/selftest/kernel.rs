//! The kernel crypto API's answers through AF_ALG, on the implementation a
//! point measures (the chosen driver, or the generic one for the software
//! path): SP 800-38A CBC and CTR, the GCM spec's cases, RFC 8439 §2.8.2.

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::path::Path;

use super::aes_modes::{
    SP800_38A_CBC_IV, SP800_38A_CTR_COUNTER, SP800_38A_PLAINTEXT, sections, sp800_38a_cbc_ciphertext,
    sp800_38a_ctr_ciphertext, sp800_38a_key,
};
use super::harness::{AeadUnderTest, aead_kat_with, compare, hex};
use super::{AesBits, KatOutcome, chacha, gcm};
use crate::provider::linux::af_alg::{Kind, Transform};
use crate::provider::linux::names;

/// One AF_ALG name, bound afresh for every answer.
struct Kernel {
    kind: Kind,
    name: String,
}

const TAG: usize = 16;

impl Kernel {
    fn crypt(
        &self,
        key: &[u8],
        encrypt: bool,
        iv: &[u8],
        aad: Option<&[u8]>,
        input: &[u8],
        out_len: usize,
    ) -> Result<Vec<u8>, String> {
        let t = Transform::bind(self.kind, &self.name).map_err(|e| e.to_string())?;
        if self.kind == Kind::Aead {
            t.set_tag_len(TAG).map_err(|e| format!("tag length: {e}"))?;
        }
        t.set_key(key).map_err(|e| format!("key: {e}"))?;
        let mut op = t.op().map_err(|e| format!("accept: {e}"))?;
        let mut buf = aad.unwrap_or(&[]).to_vec();
        buf.extend_from_slice(input);
        // Exactly what the kernel will write: a longer buffer makes an skcipher's
        // read wait for more input that never comes.
        let mut out = vec![0u8; out_len + aad.map_or(0, <[u8]>::len)];
        let n = op
            .crypt(encrypt, iv, aad.map(|a| a.len() as u32), &buf, &mut out)
            .map_err(|e| e.to_string())?;
        // Since 4.9 the output repeats the associated data; before, it does not.
        let aad_len = aad.map_or(0, <[u8]>::len);
        let skip = if n == out_len + aad_len { aad_len } else { 0 };
        Ok(out[skip..n].to_vec())
    }
}

impl AeadUnderTest for Kernel {
    fn seal(&self, key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut out = self.crypt(key, true, nonce, Some(aad), pt, pt.len() + TAG)?;
        if out.len() != pt.len() + TAG {
            return Err(format!("{} bytes out for {} in", out.len(), pt.len()));
        }
        let tag = out.split_off(pt.len());
        Ok((out, tag))
    }

    fn open(&self, key: &[u8], nonce: &[u8], aad: &[u8], ct: &[u8], tag: &[u8]) -> Result<Vec<u8>, String> {
        let mut input = ct.to_vec();
        input.extend_from_slice(tag);
        self.crypt(key, false, nonce, Some(aad), &input, ct.len())
    }
}

fn bits(alg: Algorithm) -> AesBits {
    match alg.cipher {
        Cipher::Aes128 => AesBits::B128,
        Cipher::Aes192 => AesBits::B192,
        _ => AesBits::B256,
    }
}

/// The KATs of `alg` on the kernel implementation `path` binds, named after
/// what was bound (`kernel gcm(aes): …`). Empty where nothing binds: the
/// measurement then fails saying why.
pub(super) fn run_for(alg: Algorithm, path: Path) -> Vec<KatOutcome> {
    let Some((kind, candidates)) = names(alg, path) else {
        return Vec::new();
    };
    let Some(name) = candidates.into_iter().find(|n| Transform::bind(kind, n).is_ok()) else {
        return Vec::new();
    };
    let k = Kernel {
        kind,
        name: name.to_string(),
    };
    let label = format!("kernel {name}");
    match alg.mode {
        Mode::Cbc | Mode::Ctr => {
            let b = bits(alg);
            let (iv, ct, appendix, mode) = if alg.mode == Mode::Cbc {
                (hex(SP800_38A_CBC_IV), sp800_38a_cbc_ciphertext(b), "F.2", "CBC")
            } else {
                (hex(SP800_38A_CTR_COUNTER), sp800_38a_ctr_ciphertext(b), "F.5", "CTR")
            };
            let (key, pt) = (sp800_38a_key(b), hex(SP800_38A_PLAINTEXT));
            let (enc, dec) = sections(appendix, b);
            let got = |encrypt: bool, input: &[u8]| {
                k.crypt(&key, encrypt, &iv, None, input, input.len())
                    .unwrap_or_else(|e| e.into_bytes())
            };
            vec![
                compare(
                    format!("{label}: SP 800-38A {enc} {mode}-AES{}.Encrypt", b.bits()),
                    "ciphertext",
                    &got(true, &pt),
                    &ct,
                ),
                compare(
                    format!("{label}: SP 800-38A {dec} {mode}-AES{}.Decrypt", b.bits()),
                    "plaintext",
                    &got(false, &ct),
                    &pt,
                ),
            ]
        }
        Mode::Gcm => gcm::vectors(bits(alg))
            .iter()
            .flat_map(|v| aead_kat_with(&label, v, &k))
            .collect(),
        Mode::Poly1305 => aead_kat_with(&label, &chacha::rfc8439_aead_vector(), &k),
        _ => Vec::new(),
    }
}
