//! The CLI's print macros: every line the subcommands print goes through the sanitiser.

/// `println!` of the CLI: the line goes through [`crate::term::visible::text`], so
/// whatever it holds from a node, an API or a file another user could write is shown,
/// never acted on by the terminal. Every line the subcommands print goes through this,
/// [`out!`], [`errln!`] or [`err!`]; only a node's streamed output (`exec`, `job logs`,
/// [`crate::term::visible::for_stdout`]) is written otherwise. `tests/terminal_output.rs`
/// holds every print site to it.
macro_rules! outln {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        println!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `print!` of the CLI (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {
        print!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `eprintln!` of the CLI (see [`outln!`]).
macro_rules! errln {
    () => {
        eprintln!()
    };
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `eprint!` of the CLI (see [`outln!`]).
macro_rules! err {
    ($($arg:tt)*) => {
        eprint!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}
