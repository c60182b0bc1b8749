//! placeholder
#![cfg(feature = "metrics")]
