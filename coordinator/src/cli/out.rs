//! Standard output of the operator commands. `println!` panics when its
//! reader has gone (`hosts | head -1`, `check | true`); [`line`] returns
//! [`Closed`] instead, which ends the command quietly ([`closed`]). Text from
//! hosts and operators goes through [`printable`] on its way to a table.

use std::fmt;
use std::io::{self, Write};

pub use cipherfleet_core::text::printable;

/// Standard output's reader has gone: nobody wants the rest, and nothing failed.
#[derive(Debug, thiserror::Error)]
#[error("standard output closed")]
pub struct Closed;

/// Writes one line to standard output.
pub fn line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Closed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing to standard output")),
    }
}

/// Whether `e` is [`Closed`].
pub fn closed(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Closed>().is_some()
}

/// `println!` for the operator commands: `outln!(…)?` ends the command with
/// [`Closed`] when the reader has gone.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
