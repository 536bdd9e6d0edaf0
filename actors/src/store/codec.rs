//! Values are bincode 2 (standard config) over serde.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|e| Error::Internal(format!("encode: {e}")))
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| Error::storage_caused("decode", e))
}

/// Decodes a value that borrows from `bytes` (strings as `&str`), for scans that
/// should not allocate per record.
pub fn decode_borrowed<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    bincode::serde::borrow_decode_from_slice(bytes, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| Error::storage_caused("decode", e))
}

pub fn encode_u64(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

pub fn decode_u64(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or_default()
}
