//! Texts one edit away from a given one, for tests that hold a fast reader
//! of a provider's stream equal to a lenient one (a typed or one-pass
//! decoder against a `serde_json::Value` walk): real payloads and their
//! near misses are where two readers of the same JSON disagree.

/// `text` itself, then every prefix of it, and at every position the text
/// with the byte there deleted, with each of `bytes` inserted there or put
/// in its place, and with a two-byte character (`é`) inserted there. Only
/// the variants that are valid UTF-8 are yielded (a stream's payload is
/// text). `bytes` are best chosen to bend JSON: quotes, backslashes,
/// brackets, separators, digits, letters of literals, control characters.
pub fn one_edit_variants<'a>(text: &'a str, bytes: &'a [u8]) -> impl Iterator<Item = String> + 'a {
    let at = move |cut: usize| {
        let raw = text.as_bytes();
        let mut out: Vec<Vec<u8>> = vec![raw[..cut].to_vec()];
        let mut accented = raw[..cut].to_vec();
        accented.extend_from_slice("é".as_bytes());
        accented.extend_from_slice(&raw[cut..]);
        out.push(accented);
        for &b in bytes {
            let mut v = raw.to_vec();
            v.insert(cut, b);
            out.push(v);
        }
        if cut < raw.len() {
            let mut v = raw.to_vec();
            v.remove(cut);
            out.push(v);
            for &b in bytes {
                let mut v = raw.to_vec();
                v[cut] = b;
                out.push(v);
            }
        }
        out.into_iter().filter_map(|v| String::from_utf8(v).ok())
    };
    std::iter::once(text.to_string()).chain((0..=text.len()).flat_map(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_edit_at_every_position_and_only_valid_text() {
        let all: Vec<String> = one_edit_variants("ab", b"x").collect();
        for want in [
            "ab", "", "a", "éab", "aéb", "abé", "xab", "axb", "abx", "b", "a", "xb", "ax",
        ] {
            assert!(
                all.iter().any(|v| v == want),
                "{want:?} missing from {all:?}"
            );
        }
        // Cutting into, deleting from or replacing a byte of a two-byte
        // character leaves invalid text, which is not yielded.
        let mut valid: Vec<String> = one_edit_variants("é", b"x").collect();
        valid.sort();
        valid.dedup();
        assert_eq!(valid, ["", "xé", "é", "éx", "éé"]);
    }
}
