//! The server harness (`turnstone_test_support::server`) and the shared test
//! paths, for this package's integration tests, which build the binary it
//! drives.
#![allow(dead_code, unused_imports)]

pub use turnstone_test_support::server::*;
pub use turnstone_test_support::{sse, target};
