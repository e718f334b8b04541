//! `--help` wraps to the terminal: at its width on a terminal, at `COLUMNS`
//! (else 100 columns) when piped, never one line per paragraph.

use crate::helpers::{agent, run_with, stdout};

/// The widest line of `args`'s help, piped, with `COLUMNS` set to `columns`.
fn widest(args: &[&str], columns: &str) -> usize {
    let mut cmd_args = args.to_vec();
    cmd_args.push("--help");
    let out = run_with(agent(), &cmd_args, &[("COLUMNS", columns)]);
    assert!(out.status.success(), "{args:?}");
    stdout(&out).lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn help_is_wrapped_to_the_terminal_width() {
    for args in [&[][..], &["bench"], &["run"], &["probe"], &["selftest"]] {
        for columns in ["100", "72"] {
            let widest = widest(args, columns);
            assert!(widest <= columns.parse().unwrap(), "{args:?} at {columns}: {widest}");
        }
    }
}
