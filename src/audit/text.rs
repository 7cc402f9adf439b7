//! [`PathText`]: raw bytes from the sandboxed program (paths, argv elements, `comm`) carried
//! losslessly through the JSON audit log. Promises: bytes that are valid UTF-8 serialize as a
//! plain JSON string; any other bytes serialize as `{"base64": "<standard base64>"}`; both forms
//! deserialize back to exactly the original bytes. Also owns the escaping used to show such text
//! on a terminal, so a hostile file name cannot inject control sequences into `guard log`.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Bytes that are usually, but not always, UTF-8 text (see the module doc for the wire form).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathText(OsString);

impl PathText {
    /// The bytes as an OS string (for paths).
    pub fn as_os_str(&self) -> &OsStr {
        &self.0
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Takes the bytes as an OS string.
    pub fn into_os_string(self) -> OsString {
        self.0
    }

    /// The text for a terminal: see [`escape_for_terminal`].
    pub fn display(&self) -> String {
        escape_for_terminal(self.as_bytes())
    }
}

/// Renders bytes as one printable line: valid UTF-8 is kept except control characters (C0, DEL,
/// C1), which become `\n`, `\t`, `\r` or `\u{..}`; a backslash is doubled; bytes that are not UTF-8
/// become `\xNN`. The result never contains a control character.
pub fn escape_for_terminal(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

impl From<OsString> for PathText {
    fn from(s: OsString) -> Self {
        PathText(s)
    }
}

impl From<&OsStr> for PathText {
    fn from(s: &OsStr) -> Self {
        PathText(s.to_owned())
    }
}

impl From<PathBuf> for PathText {
    fn from(p: PathBuf) -> Self {
        PathText(p.into_os_string())
    }
}

impl From<&Path> for PathText {
    fn from(p: &Path) -> Self {
        PathText(p.as_os_str().to_owned())
    }
}

impl From<String> for PathText {
    fn from(s: String) -> Self {
        PathText(s.into())
    }
}

impl From<&str> for PathText {
    fn from(s: &str) -> Self {
        PathText(s.into())
    }
}

impl From<Vec<u8>> for PathText {
    fn from(b: Vec<u8>) -> Self {
        PathText(OsString::from_vec(b))
    }
}

impl From<&[u8]> for PathText {
    fn from(b: &[u8]) -> Self {
        PathText(OsStr::from_bytes(b).to_owned())
    }
}

impl From<PathText> for PathBuf {
    fn from(t: PathText) -> Self {
        PathBuf::from(t.0)
    }
}

impl serde::Serialize for PathText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        match self.0.to_str() {
            Some(text) => s.serialize_str(text),
            None => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("base64", &STANDARD.encode(self.as_bytes()))?;
                map.end()
            }
        }
    }
}

/// The two wire forms.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Wire {
    Text(String),
    Binary(Base64),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Base64 {
    base64: String,
}

impl<'de> serde::Deserialize<'de> for PathText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Wire::deserialize(d)? {
            Wire::Text(text) => Ok(PathText::from(text)),
            Wire::Binary(Base64 { base64 }) => STANDARD
                .decode(base64.as_bytes())
                .map(PathText::from)
                .map_err(|e| serde::de::Error::custom(format_args!("invalid base64 text: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: &PathText) -> (String, PathText) {
        let json = serde_json::to_string(t).expect("serializes");
        let back = serde_json::from_str(&json).expect("deserializes");
        (json, back)
    }

    #[test]
    fn utf8_is_a_plain_string() {
        let t = PathText::from("/ws/naïve file\n");
        let (json, back) = round_trip(&t);
        assert_eq!(json, r#""/ws/naïve file\n""#);
        assert_eq!(back, t);
    }

    #[test]
    fn invalid_utf8_round_trips_through_base64() {
        let bytes = b"/ws/\xff\xfe bad\x00\n".to_vec();
        let t = PathText::from(bytes.clone());
        let (json, back) = round_trip(&t);
        assert_eq!(
            json,
            format!(r#"{{"base64":"{}"}}"#, STANDARD.encode(&bytes))
        );
        assert_eq!(back.as_bytes(), &bytes[..]);
    }

    #[test]
    fn rejects_malformed_binary_forms() {
        for bad in [
            r#"{"base64":"!!"}"#,
            r#"{"base64":"AA==","x":1}"#,
            r#"{"b64":"AA=="}"#,
            "42",
        ] {
            assert!(serde_json::from_str::<PathText>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn terminal_escaping_leaves_no_control_characters() {
        let shown = escape_for_terminal(b"a\x1b[31mred\x07\\\xff\xc2\x85z\n");
        assert_eq!(shown, "a\\u{1b}[31mred\\u{7}\\\\\\xff\\u{85}z\\n");
        assert!(!shown.chars().any(char::is_control));
    }
}
