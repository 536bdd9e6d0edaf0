//! Values are bincode 2 (standard config) over serde.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|e| Error::Internal(format!("encode: {e}")))
}

/// A decode may claim this many bytes of memory per byte of input: a length prefix is
/// trusted only this far, so damaged bytes (a torn log record, a flipped bit) give an
/// error instead of an allocation of up to 2^64 bytes that aborts the process. 16 is
/// the widest any one decoded value is per encoded byte (a 1-byte varint `u128`).
const CLAIM_PER_BYTE: usize = 16;

/// bincode's limit is a type-level constant: the smallest tier (a factor of 4 apart)
/// that covers `CLAIM_PER_BYTE` times the input, and never more than 1 GiB, whatever the
/// input (no record is near that: write batches are a few MiB).
macro_rules! with_limit {
    ($len:expr, $config:ident => $body:expr) => {{
        let need = $len.saturating_mul(CLAIM_PER_BYTE);
        macro_rules! tier {
            ($limit:expr) => {{
                let $config = bincode::config::standard().with_limit::<{ $limit }>();
                $body
            }};
        }
        if need <= 1 << 14 {
            tier!(1 << 14)
        } else if need <= 1 << 16 {
            tier!(1 << 16)
        } else if need <= 1 << 18 {
            tier!(1 << 18)
        } else if need <= 1 << 20 {
            tier!(1 << 20)
        } else if need <= 1 << 22 {
            tier!(1 << 22)
        } else if need <= 1 << 24 {
            tier!(1 << 24)
        } else if need <= 1 << 26 {
            tier!(1 << 26)
        } else if need <= 1 << 28 {
            tier!(1 << 28)
        } else {
            tier!(1 << 30)
        }
    }};
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    with_limit!(bytes.len(), config => bincode::serde::decode_from_slice(bytes, config))
        .map(|(v, _)| v)
        .map_err(|e| Error::storage_caused("decode", e))
}

/// Decodes a value that borrows from `bytes` (strings as `&str`), for scans that
/// should not allocate per record.
pub fn decode_borrowed<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    with_limit!(bytes.len(), config => bincode::serde::borrow_decode_from_slice(bytes, config))
        .map(|(v, _)| v)
        .map_err(|e| Error::storage_caused("decode", e))
}

pub fn encode_u64(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

pub fn decode_u64(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or_default()
}
