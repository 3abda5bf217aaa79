//! The API of `zmij` (the float-to-text crate serde_json writes floats
//! with, and names floats in its error messages with) over `core`'s own
//! formatting.
//!
//! Why: zmij's tables are about 17 KB of a component's data segments, and
//! serde_json links them into any component that reads JSON, through its
//! error messages. A component's data segments are mapped into every
//! instance of it, whole (the kernel's fault-around maps them all at the
//! first read, and resident size counts them per instance), and a provider
//! adapter runs one instance per model stream in flight: in the built-in
//! adapters the tables were 4 of the 11 pages each instance maps. `core`'s
//! formatting (Grisu with a Dragon4 fallback) writes the same shortest
//! round-trip digits from far smaller tables. The guest workspaces patch
//! crates.io `zmij` with this crate; a test in `host/runtime/tests/loading.rs`
//! fails if a provider adapter's data grows back.
//!
//! Output differs from zmij's in form only: an exponent has no `+`
//! (`1.5e300`, not `1.5e+300`), and `core` switches to exponent form below
//! 1e-4 and from 1e16. Both are valid JSON numbers that read back to the
//! same value.
#![no_std]

use core::fmt::{self, Write};

/// The longest text a finite `f64` can take in `core`'s `Debug` form is 24
/// bytes (`-2.2250738585072014e-308`); `f32` less.
const CAPACITY: usize = 32;

/// A place to format one float into, as zmij's `Buffer` is.
pub struct Buffer {
    bytes: [u8; CAPACITY],
    len: usize,
}

impl Buffer {
    /// An empty buffer.
    #[inline]
    pub fn new() -> Self {
        Buffer {
            bytes: [0; CAPACITY],
            len: 0,
        }
    }

    /// `f` as text: the shortest digits that read back to `f`; `NaN`,
    /// `inf` and `-inf` for the values that have no digits (as zmij writes
    /// them).
    pub fn format<F: Float>(&mut self, f: F) -> &str {
        self.len = 0;
        // Writing a float's Debug form cannot fail but for lack of room,
        // which CAPACITY rules out (tested below for the extremes).
        let _ = write!(self, "{f:?}");
        self.as_str()
    }

    /// [`Buffer::format`] for a finite `f`. For a non-finite one zmij
    /// promises "some correctly formatted but unspecified numerical value",
    /// so a writer that trusts it still writes a number: `0.0`.
    pub fn format_finite<F: Float>(&mut self, f: F) -> &str {
        if f.is_finite() { self.format(f) } else { "0.0" }
    }

    fn as_str(&self) -> &str {
        // Only whole `&str`s were copied in, so the bytes are UTF-8.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl Write for Buffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Default for Buffer {
    #[inline]
    fn default() -> Self {
        Buffer::new()
    }
}

/// A float type a [`Buffer`] formats: `f32` or `f64`.
pub trait Float: private::Sealed {}
impl Float for f32 {}
impl Float for f64 {}

mod private {
    pub trait Sealed: core::fmt::Debug + Copy {
        fn is_finite(self) -> bool;
    }
    impl Sealed for f32 {
        fn is_finite(self) -> bool {
            f32::is_finite(self)
        }
    }
    impl Sealed for f64 {
        fn is_finite(self) -> bool {
            f64::is_finite(self)
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn shortest_digits_that_read_back_to_the_same_value() {
        let mut b = Buffer::new();
        for f in [
            0.7,
            0.1 + 0.2,
            1.0 / 3.0,
            2.0,
            -0.0,
            1e-7,
            1e16,
            123456.789,
            f64::MAX,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -2.2250738585072014e-308,
        ] {
            let text = b.format_finite(f).to_string();
            assert_eq!(text.parse::<f64>().unwrap().to_bits(), f.to_bits(), "{text}");
            // All of it fit: nothing was cut off at the buffer's end.
            assert_eq!(text, std::format!("{f:?}"));
        }
        assert_eq!(b.format(0.7), "0.7");
        assert_eq!(b.format(2.0), "2.0");
        assert_eq!(b.format(1.5e300), "1.5e300");
        assert_eq!(b.format(0.7f32), "0.7");
        assert_eq!(b.format(f32::MIN_POSITIVE), "1.1754944e-38");
    }

    #[test]
    fn values_without_digits_read_as_zmij_writes_them() {
        let mut b = Buffer::new();
        assert_eq!(b.format(f64::NAN), "NaN");
        assert_eq!(b.format(f64::INFINITY), "inf");
        assert_eq!(b.format(f64::NEG_INFINITY), "-inf");
        assert_eq!(b.format(f32::NAN), "NaN");
        // Text that promises a number stays one.
        assert_eq!(b.format_finite(f64::NAN), "0.0");
        assert_eq!(b.format_finite(f32::NEG_INFINITY), "0.0");
    }
}
