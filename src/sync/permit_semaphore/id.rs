//! [`PermitId`]: the id of one permit of a `PermitExpirableSemaphore`, as Redisson writes it.

use crate::error::{LockError, Result};

/// The id of one permit of a [`PermitExpirableSemaphore`](super::PermitExpirableSemaphore): 32
/// lowercase hex characters, as Redisson's ids (stored in Redis as their 16 raw bytes). Ids made
/// by Java clients can be parsed with [`PermitId::parse`] and released here, and vice versa.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PermitId {
    hex: String,
    pub(in crate::sync) bytes: [u8; 16],
}

impl PermitId {
    pub(super) fn random() -> PermitId {
        let u = uuid::Uuid::new_v4();
        PermitId {
            hex: u.simple().to_string(),
            bytes: *u.as_bytes(),
        }
    }

    /// Parses 32 hex characters (either case; kept as lowercase).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for anything else.
    pub fn parse(s: &str) -> Result<PermitId> {
        let bad = || LockError::InvalidArgument("a permit id is 32 hex characters");
        if s.len() != 32 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(s.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(PermitId {
            hex: s.to_ascii_lowercase(),
            bytes,
        })
    }

    /// The id's 16 raw bytes (its form on the wire).
    pub(in crate::sync) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The id as 32 lowercase hex characters (what Java's API hands out).
    pub fn as_str(&self) -> &str {
        &self.hex
    }
}

impl std::fmt::Display for PermitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_round_trip_as_hex() {
        let id = PermitId::random();
        assert_eq!(id.as_str().len(), 32);
        let back = PermitId::parse(&id.as_str().to_ascii_uppercase()).unwrap();
        assert_eq!(back, id);
        assert!(PermitId::parse("xyz").is_err());
        assert!(PermitId::parse(&"g".repeat(32)).is_err());
        let id = PermitId::parse("000102030405060708090a0b0c0d0e0f").unwrap();
        assert_eq!(id.bytes[15], 15);
    }
}
