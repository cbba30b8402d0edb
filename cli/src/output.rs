//! What the operator commands print on stdout, a line at a time: a reader
//! that went away (`idem show KEY | head -n 1`) ends the command quietly,
//! with success, as it ends `cat`, rather than in a panic.

use std::io::Write;

/// Prints one line on stdout: `say!("{} records", n)`.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Writes `line` and a newline to stdout; ends the process if it cannot.
pub(crate) fn line(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("idem: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
