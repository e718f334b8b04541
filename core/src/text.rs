//! Text: enums that travel as text, and text from elsewhere made safe to print.
//!
//! Enums travel as text in JSON, CSV, query strings, SQL columns and flags.
//! One macro gives each the same surface, so no layer retypes the names:
//! `ALL` (every value, in display order), `as_str`, `Display`, `FromStr` and
//! `TryFrom<String>` (the latter for `#[sqlx(try_from = "String")]`), and
//! serde as the same text.
//!
//! [`printable`] is how a terminal table shows text that came from a host or
//! an operator (a host name, a CPU model, a finding's summary).

use std::borrow::Cow;

/// `s` as a terminal line may show it: control characters (a newline, an
/// escape sequence) and the invisible characters that reorder or hide text
/// (bidirectional overrides, zero-width marks) are written as `\n`,
/// `\u{1b}`, `\u{202e}`, so that text cannot forge a line or recolour the
/// terminal; everything else, quotes and accents included, as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hides) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if hides(c) {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Whether `c` would act on the terminal or the text around it rather than show.
fn hides(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// A text value that is not one of an enum's names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{value}'; accepted: {accepted}")]
pub struct UnknownValue {
    /// What was being parsed, e.g. `direction`.
    pub what: &'static str,
    /// The text as given.
    pub value: String,
    /// The accepted names, comma separated.
    pub accepted: String,
}

/// Declares a text enum: `text_enum! { /// doc \n pub enum Direction ("direction") { Encrypt = "encrypt", … } }`.
#[macro_export]
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in the order tables and choices list them.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value's name as it travels (JSON, CSV, SQL, query strings).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::text::UnknownValue;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $( $text => Ok($name::$variant), )+
                    other => Err($crate::text::UnknownValue {
                        what: $what,
                        value: other.to_string(),
                        accepted: [$($text),+].join(", "),
                    }),
                }
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = $crate::text::UnknownValue;
            fn try_from(s: String) -> ::std::result::Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl $crate::text::__serde::Serialize for $name {
            fn serialize<S: $crate::text::__serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::text::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::text::__serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as $crate::text::__serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(<D::Error as $crate::text::__serde::de::Error>::custom)
            }
        }
    };
}

#[doc(hidden)]
pub use serde as __serde;

#[cfg(test)]
mod tests {
    text_enum! {
        /// A test enum.
        pub enum Colour ("colour") { Red = "red", DarkBlue = "dark-blue" }
    }

    #[test]
    fn every_value_round_trips_through_text_and_json() {
        for c in Colour::ALL {
            assert_eq!(c.as_str().parse::<Colour>().unwrap(), *c);
            assert_eq!(Colour::try_from(c.to_string()).unwrap(), *c);
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(serde_json::from_str::<Colour>(&json).unwrap(), *c);
        }
        assert_eq!(serde_json::to_string(&Colour::DarkBlue).unwrap(), "\"dark-blue\"");
    }

    #[test]
    fn printable_text_escapes_what_acts_on_the_terminal_and_nothing_else() {
        use super::printable;
        for (text, shown) in [
            ("GCM's tag", "GCM's tag"),
            (
                "Intel(R) Xeon(R) \"Gold\" – Ünïcode",
                "Intel(R) Xeon(R) \"Gold\" – Ünïcode",
            ),
            ("db-1\nwarning  forged", "db-1\\nwarning  forged"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("tab\there", "tab\\there"),
        ] {
            assert_eq!(printable(text), shown, "{text:?}");
        }
        assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn unknown_text_names_what_is_accepted() {
        let e = "green".parse::<Colour>().unwrap_err().to_string();
        assert_eq!(e, "unknown colour 'green'; accepted: red, dark-blue");
        assert!(serde_json::from_str::<Colour>("\"Red\"").is_err());
    }
}
